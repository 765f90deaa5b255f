"""A stand-in BMC for fuzzing discovery: serves a recorded vendor mockup over loopback HTTP.

Stand-in for a real BMC (sushy-static serves the same trees, but one process per mutated case
would be far too slow): GET of any recorded resource, a session POST answered with a token and
a Location, DELETE of the session. One resource at a time is replaced by mutated bytes. A
collection asked for with ``$expand`` answers with its members' bodies inline, the mutated one
spliced in as it is (so the client's checks of expanded answers are fuzzed too).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


def mockup_files(root: Path) -> dict[str, Path]:
    """``/redfish/v1/...`` -> its ``index.json`` in a recorded mockup tree."""
    files: dict[str, Path] = {}
    # DMTF mockups start at the service root; libredfish's recordings at redfish/v1.
    prefix = "" if (root / "redfish" / "v1").is_dir() else "/redfish/v1"
    for f in root.rglob("index.json"):
        rel = f.parent.relative_to(root).as_posix()
        files[(prefix + "/" + rel).rstrip("/").replace("/.", "") or "/"] = f
    return files


def load_mockup(root: Path) -> dict[str, bytes]:
    """``/redfish/v1/...`` -> body of a recorded mockup tree."""
    return {path: f.read_bytes() for path, f in mockup_files(root).items()}


class Peer:
    """The HTTP server and the tree it serves; ``override`` swaps one resource's body."""

    def __init__(self) -> None:
        self.tree: dict[str, bytes] = {}
        self.override: tuple[str, bytes] | None = None
        self.seen: list[str] = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each response waits 40 ms for a delayed ACK

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                path = url.path.rstrip("/") or "/"
                peer.seen.append(path)
                body = peer.body(path)
                expanded = peer.expanded(body) if "$expand" in parse_qs(url.query) else None
                if expanded is not None:
                    self._send(200, expanded)
                elif body is not None:
                    self._send(200, body)
                else:
                    self._send(404, json.dumps({"error": {"code": "Base.1.0.ResourceMissingAtURI",
                                                          "message": "not found"}}).encode())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(201, b'{"Id": "1"}', {"X-Auth-Token": "fuzz-token",
                                                 "Location": "/redfish/v1/SessionService/Sessions/1"})

            def do_DELETE(self) -> None:
                self._send(204, b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


    def body(self, path: str) -> bytes | None:
        """What ``path`` answers: the mutated bytes if it is the one overridden."""
        if self.override and self.override[0] == path:
            return self.override[1]
        return self.tree.get(path)

    def expanded(self, body: bytes | None) -> bytes | None:
        """A collection with its members' bodies inline, or None if ``body`` is no collection."""
        try:
            doc = json.loads(body or b"")
        except (ValueError, RecursionError):  # a mutated body: served as it is
            return None
        members = doc.get("Members") if isinstance(doc, dict) else None
        if not isinstance(members, list):
            return None
        parts = []
        for m in members:
            ref = m.get("@odata.id") if isinstance(m, dict) else None
            path = ref.rstrip("/") if isinstance(ref, str) else None
            if path is not None:
                self.seen.append(path)
            raw = self.body(path) if path is not None else None
            parts.append(raw if raw is not None else json.dumps(m).encode())
        doc["Members"] = "@MEMBERS@"
        head, tail = json.dumps(doc).encode().split(b'"@MEMBERS@"', 1)
        return head + b"[" + b",".join(parts) + b"]" + tail


_PEER: Peer | None = None


def peer() -> Peer:
    """The one stand-in BMC of this process (started on first use)."""
    global _PEER
    if _PEER is None:
        _PEER = Peer()
    return _PEER
