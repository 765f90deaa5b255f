"""The deploy HTTP server (werkzeug, threaded, in a background thread).

Serves iPXE scripts per MAC, the ramdisk, images (with Range support), per-host configuration
and cloud-init/autoinstall data, and receives the deploy callbacks. Request logs go through the
``provisioner.deploy.http`` logger with tokens cut out of every path.

Image streams (the files in ``gated_files``) go only to hosts being deployed: the GET carries
``?host=<name>`` of a registered session and comes from that host's reserved address (403 and
404 otherwise, before the gate is asked: another address cannot take, queue for or spend a
host's stream). A stream that moves fewer than ``min_stream_bps`` over a window is cut
(:mod:`~provisioner.deploy.embedded.min_rate`). They are admitted by a StreamGate: beyond
``max_image_streams`` at once a GET waits in the server (a long poll of at most ``hold_s``, its
FIFO ticket in the gate's queue) and gets the next released stream the moment it is given back;
a hold that runs out, or a request beyond the gate's hold slots, is answered ``503`` with
``Retry-After``. A stream is given back when its body is fully sent or the client goes away (the
WSGI iterator's close). Everything else (iPXE, kernel/ramdisk, config, seeds, callbacks) is never
gated.

With peer serving on, a host whose ramdisk verified its image (the ``verified`` callback with
``?serve=1``) serves it to other hosts until the gate lets it go on (its long poll,
``/deploy/<host>/peer``); a waiting host handed such a peer gets ``307`` to the peer's address,
with a download ticket bound to its own address (:meth:`HostSession.peer_ticket`).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from werkzeug.exceptions import (
    BadRequest,
    HTTPException,
    NotFound,
    RequestEntityTooLarge,
    RequestURITooLarge,
)
from werkzeug.routing import Map, Rule
from werkzeug.utils import send_file
from werkzeug.wrappers import Request, Response
from werkzeug.wsgi import ClosingIterator

from provisioner.deploy.embedded import ipxe
from provisioner.deploy.embedded.gate import StreamGate
from provisioner.deploy.embedded.min_rate import DEFAULT_WINDOW_S, at_least
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.deploy.embedded.sessions import (
    FINISHED,
    KINDS,
    REBOOT,
    TERMINAL,
    VERIFIED,
    CallbackRefused,
    HostSession,
    plain_ip,
)
from provisioner.deploy.embedded.stream_progress import counted
from provisioner.exceptions import DeployError
from provisioner.serving import GuardedHandler, GuardedServer, client_gone
from provisioner.settings.embedded import DEFAULT_IMAGE_HOLD_S, DEFAULT_MAX_HOSTS_IN_FLIGHT

log = logging.getLogger("provisioner.deploy.http")
_PHONE_HOME = re.compile(r"(/phone-home/[^/]+/)[^/?]+")
_AUTOINSTALL_KEY = re.compile(r"(/autoinstall/[^/]+/)[^/?]+(?=/)")
_RELEASE = "provisioner.release_stream"  # environ key: gives back the request's image stream
_STREAM = "provisioner.image_session"  # environ key: the session an image GET streams to
# Real requests are short: the longest URL is an image path with ?host=<name>, the largest body
# a deploy or installer log (the server keeps its last MiB). Beyond these a request is refused
# before anything of it is kept (414/413).
MAX_URL = 4096
MAX_BODY = 8 * 1024 * 1024
_LOGGED_PATH = 200
# A held image request waits this long at most by default (settings.embedded.image_hold_s).
IMAGE_HOLD_S = DEFAULT_IMAGE_HOLD_S
# A held 503's reason phrase: the ramdisk (busybox wget shows only the status line) asks again
# at once after it, and waits Retry-After after a plain 503.
HELD_REASON = "Stream Queue Hold Expired"
PEER_POLL_S = 0.5  # a peer's long poll looks again this often whether it may leave


def connections_for(hosts: int) -> int:
    """Connections the server takes at once for ``hosts`` in flight (and the operator's own)."""
    return 4 * hosts + 64


def redact_path(path: str) -> str:
    """A request path safe to log: tokens and keys replaced by ``***``, and cut short."""
    path = path.split("?", 1)[0]
    path = _AUTOINSTALL_KEY.sub(r"\1***", _PHONE_HOME.sub(r"\1***", path))
    return path if len(path) <= _LOGGED_PATH else path[:_LOGGED_PATH] + "..."


class _QuietHandler(GuardedHandler):
    """The guarded handler (provisioner/serving.py), logging through our logger without
    tokens."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # busy-stream 503s come every second from each waiting host: the gate logs them
        level = logging.DEBUG if str(getattr(code, "value", code)) == "503" else logging.INFO
        log.log(
            level,
            "%s %s %s -> %s",
            self.client_address[0],
            # unset when the request line itself was refused (too long, malformed)
            getattr(self, "command", None) or "-",
            redact_path(getattr(self, "path", None) or "-"),
            code,
        )

    def connection_dropped(self, error: BaseException, environ: Any = None) -> None:
        # a client gone mid-response, a write stuck past the socket's timeout, or a stream cut
        # below the rate floor (logged where it is cut): the body's close gives the stream back
        log.info("%s: connection ended mid-response (%s)", self.client_address[0],
                 type(error).__name__)

    def log(self, type: str, message: str, *args: Any) -> None:
        if type == "error":
            text = message % args if args else message
            # http.server quotes the refused request line: keep no token, no megabyte of it
            log.warning("%s: %s", self.client_address[0], redact_path(text))


def _mac_key(value: str) -> str:
    return value.lower().replace("-", ":")


def _ticket_key(host: str) -> str:
    # the image URL handed to a host carries ?host=<name>: one ticket per host session
    return f"host {host}"


def _then(body: Iterable[bytes], done: Callable[[], None]) -> Iterator[bytes]:
    """Yield ``body``; call ``done()`` once every chunk went out (not when the client drops:
    werkzeug then closes the iterator mid-way)."""
    try:
        yield from body
    finally:
        close = getattr(body, "close", None)
        if callable(close):
            close()
    done()


def _client_gone(environ: dict[str, Any]) -> Callable[[], bool] | None:
    """A check that the client of a held request closed its connection."""
    sock = environ.get("werkzeug.socket")
    return client_gone(sock) if isinstance(sock, socket.socket) else None


class DeployServer:
    """Holds the sessions of the hosts being deployed and serves them over HTTP."""

    def __init__(
        self,
        *,
        bind: str,
        port: int,
        public_url: str,
        max_image_streams: int | None = None,
        retry_after_s: int = 1,
        hold_s: float = IMAGE_HOLD_S,
        max_held: int = DEFAULT_MAX_HOSTS_IN_FLIGHT,
        peers: PeerPool | None = None,
        max_connections: int | None = None,
        min_stream_bps: float = 0.0,
        rate_window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        self.bind = bind
        self.port = port
        self.public_url = public_url
        self.files: dict[str, Path] = {}  # URL path under /files/ -> file
        self.gated_files: set[str] = set()  # names in ``files`` whose GETs take an image stream
        self.retry_after_s = retry_after_s
        self.hold_s = hold_s  # 0: no long poll, every busy answer is an immediate 503
        # connections served at once: a host in flight holds at most an image request, a
        # peer's poll, a callback and a log upload; beyond it, a 503 without a thread
        self.max_connections = max_connections or connections_for(max_held)
        # an image stream slower than this over a window is cut (0: never)
        self.min_stream_bps = min_stream_bps
        self.rate_window_s = rate_window_s
        # A ticket outlives a few retries (Retry-After plus the ramdisk's jitter) before it
        # expires; None: streams are not gated.
        self.gate = (
            StreamGate(max_image_streams, ticket_ttl_s=4 * retry_after_s + 30, max_held=max_held,
                       peers=peers)
            if max_image_streams
            else None
        )
        # peers given: hosts whose image verified serve it (HostSession.peer_url)
        self.peer_serving = peers is not None and self.gate is not None
        self.static: dict[str, bytes] = {}  # URL path under /static/ -> content
        self._by_host: dict[str, HostSession] = {}
        self._by_mac: dict[str, HostSession] = {}
        self._lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending_memo = (0, -PEER_POLL_S)  # (count, when): see _pending
        self._server: GuardedServer | None = None
        self._thread: threading.Thread | None = None
        self._map = Map(
            [
                Rule("/ipxe/boot.ipxe", endpoint="chain"),
                Rule("/ipxe/<mac>", endpoint="ipxe"),
                Rule("/files/<path:name>", endpoint="file"),
                Rule("/static/<name>", endpoint="static"),
                Rule("/deploy/<host>/config", endpoint="config"),
                Rule("/deploy/<host>/peer", endpoint="peer"),
                Rule("/deploy/<host>/seed/<doc>", endpoint="seed"),
                Rule("/autoinstall/<host>/<key>/<doc>", endpoint="autoinstall"),
                Rule("/callback/<host>/<kind>", endpoint="callback", methods=["POST"]),
                Rule("/phone-home/<host>/<token>", endpoint="phone_home", methods=["POST"]),
            ]
        )

    # -- sessions ---------------------------------------------------------------------------
    def register(self, session: HostSession, *, retry: bool = False) -> None:
        """Serve a host's attempt (replacing any earlier attempt of the same host); a ``retry``
        (an earlier attempt failed) queues for its image stream ahead of first attempts."""
        with self._lock:
            old = self._by_host.pop(session.host, None)
            if old is not None:
                self._by_mac.pop(old.mac, None)
            self._by_host[session.host] = session
            self._by_mac[_mac_key(session.mac)] = session
        if retry and self.gate is not None:
            self.gate.prefer(_ticket_key(session.host))

    def unregister(self, host: str) -> None:
        """Stop serving a host."""
        with self._lock:
            s = self._by_host.pop(host, None)
            if s is not None:
                self._by_mac.pop(_mac_key(s.mac), None)
        if self.gate is not None:
            self.gate.forget(_ticket_key(host))

    def session(self, host: str) -> HostSession:
        """The session of a host being served; NotFound (404) otherwise."""
        s = self._served(host)
        if s is None:
            raise NotFound(f"no deploy in progress for {host}")
        return s

    def _served(self, host: str | None) -> HostSession | None:
        """The session of ``host`` if it is being served."""
        if host is None:
            return None
        with self._lock:
            return self._by_host.get(host)

    # -- WSGI -------------------------------------------------------------------------------
    def wsgi(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        """The WSGI application."""
        request = Request(environ)
        try:
            self._admit_request(request)
            try:
                adapter = self._map.bind_to_environ(environ)
            except (UnicodeError, ValueError):  # a Host header that is no host name
                raise BadRequest("the Host header is not a host name") from None
            endpoint, args = adapter.match()
            response = getattr(self, f"_on_{endpoint}")(request, **args)
        except CallbackRefused as exc:
            log.warning("refused %s %s: %s", request.method, redact_path(request.path), exc)
            response = Response(f"{exc}\n", status=exc.status, mimetype="text/plain")
        except HTTPException as exc:
            response = exc.get_response(environ)
        stream: HostSession | None = environ.pop(_STREAM, None)
        release = environ.pop(_RELEASE, None)
        if stream is None and release is None:
            result: Iterable[bytes] = response(environ, start_response)
            return result
        try:
            body = response(environ, start_response)
        except BaseException:
            if release is not None:
                release()
            raise
        if stream is not None and response.status_code in (200, 206):
            body = self._streamed(body, stream, environ, response)
        # werkzeug's server closes the iterator when the body is sent and when the client
        # drops mid-stream (a write error, a cut): either way the stream goes back to the gate
        return ClosingIterator(body, [release] if release is not None else [])

    def _streamed(self, body: Iterable[bytes], session: HostSession, environ: dict[str, Any],
                  response: Response) -> Iterable[bytes]:
        """An image body on its way to ``session``'s host: counted for the progress view, cut
        below the rate floor, and the image marked sent once a whole (200) body went out."""
        body = counted(body, session.host, response.content_length)
        sock = environ.get("werkzeug.socket")
        body = at_least(body, min_bps=self.min_stream_bps, window_s=self.rate_window_s,
                        sock=sock if isinstance(sock, socket.socket) else None,
                        what=f"image stream of {session.host}")
        if response.status_code == 200:  # the whole image, not a range of it
            body = _then(body, session.image_sent)
        return body

    @staticmethod
    def _admit_request(request: Request) -> None:
        """Refuse an oversized URL (414) or body (413) before anything else looks at it."""
        path = request.environ.get("PATH_INFO", "")
        query = request.environ.get("QUERY_STRING", "")
        if len(path) + len(query) > MAX_URL:
            raise RequestURITooLarge(f"URLs here are at most {MAX_URL} characters")
        if (request.content_length or 0) > MAX_BODY:
            raise RequestEntityTooLarge(f"request bodies here are at most {MAX_BODY} bytes")

    @staticmethod
    def _read_body(request: Request) -> bytes:
        """The request body, refused (413) past MAX_BODY, also when sent without a length."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = request.stream.read(64 * 1024)
            except (OSError, ValueError):  # a malformed chunked body, or the client gone
                raise BadRequest("the request body is not valid HTTP (chunked encoding)"
                                 ) from None
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_BODY:
                raise RequestEntityTooLarge(f"request bodies here are at most {MAX_BODY} bytes")
            chunks.append(chunk)

    def _host_session(self, request: Request, host: str) -> HostSession:
        """The session of ``host``, if this request comes from the host's reserved address."""
        s = self.session(host)
        s.check_client(request.remote_addr)
        return s

    @staticmethod
    def _text(body: str, mimetype: str = "text/plain") -> Response:
        return Response(body, mimetype=mimetype, headers={"Cache-Control": "no-store"})

    def _on_chain(self, request: Request) -> Response:
        return self._text(ipxe.chain_script(self.public_url))

    def _on_ipxe(self, request: Request, mac: str) -> Response:
        with self._lock:
            s = self._by_mac.get(_mac_key(mac))
        if s is None:
            raise NotFound("no deploy for this MAC")
        if s.installed:
            return self._text(ipxe.local_boot_script(s.host))  # holds no secret
        s.check_client(request.remote_addr)
        return self._text(s.ipxe_script)

    def _on_file(self, request: Request, name: str) -> Response:
        path = self.files.get(name)
        if path is None:
            raise NotFound()
        if name in self.gated_files and request.method == "GET":
            session = self._image_client(request)
            request.environ[_STREAM] = session
            if self.gate is not None:
                refused = self._admit(request, session)
                if refused is not None:
                    return refused
        try:
            return send_file(path, request.environ, conditional=True, max_age=None)
        except BaseException:
            release = request.environ.pop(_RELEASE, None)
            if release is not None:
                release()
            raise

    def _image_client(self, request: Request) -> HostSession:
        """The session an image GET streams to: its ``?host=`` is being deployed and the request
        comes from that host's reserved address (else refused, the gate never asked)."""
        host = request.args.get("host")
        if not host:
            raise CallbackRefused(
                403, f"the image is streamed only to hosts being deployed (?host=<name>), "
                f"not to {request.remote_addr}")
        session = self._served(host)
        if session is None:
            raise CallbackRefused(404, f"no deploy in progress for {host[:64]!r}; "
                                  f"{request.remote_addr} gets no image stream")
        session.check_client(request.remote_addr)
        return session

    def _admit(self, request: Request, session: HostSession) -> Response | None:
        """Take an image stream for this request (None), or the 503 that refuses it."""
        assert self.gate is not None
        gate = self.gate
        key = _ticket_key(session.host)
        what = f"{request.remote_addr} ({key})"
        if session.image_streams:
            # its ramdisk streams again (a broken or corrupt stream): ahead of first attempts
            gate.prefer(key)
        # the host asks from its own address (checked): a peer may serve it
        a = gate.admit(key, self.hold_s, gone=_client_gone(request.environ),
                       peers_ok=self.peer_serving, locality=session.locality)
        if not a.admitted:
            # the first refusal of a ticket at info, its retries at debug: no log flood
            level = logging.INFO if a.waited_s == 0 else logging.DEBUG
            log.log(
                level,
                "image stream refused for %s%s: %d/%d streams busy, queue place %d, waited %.0f s",
                what,
                " after a hold" if a.held else "",
                a.active,
                gate.limit,
                a.position,
                a.waited_s,
            )
            # a held refusal: ask again at once (the ticket keeps its place); else Retry-After
            return self._busy(
                f"all {gate.limit} image streams are busy; queue place {a.position}, "
                f"retry in {0 if a.held else self.retry_after_s} s\n",
                held=a.held,
            )
        session.image_admitted()
        if a.source is not None:
            return self._to_peer(request, key, a.source, a.waited_s)
        log.info(
            "image stream %d/%d admitted for %s %s after %.0f s in the queue",
            a.active,
            gate.limit,
            what,
            redact_path(request.path),
            a.waited_s,
        )
        once = threading.Lock()

        def release() -> None:
            if not once.acquire(blocking=False):  # close() may be called more than once
                return
            gate.release(key)
            log.info("image stream released by %s (%d/%d busy)", what, gate.active, gate.limit)

        request.environ[_RELEASE] = release
        return None

    def _to_peer(self, request: Request, key: str, peer: str, waited_s: float) -> Response:
        """The answer that sends a host to the peer the gate handed it: 307 to the peer's image,
        with a ticket the peer accepts only from this client's address."""
        assert self.gate is not None
        source = self._served(peer.removeprefix("host "))
        if source is None or source.peer_url is None:
            # the peer's deploy ended meanwhile: its next ask drops the peer and finds another
            return self._busy("the peer left; ask again\n", held=True)
        log.info("image stream for %s (%s) handed to peer %s after %.0f s in the queue",
                 request.remote_addr, key, source.host, waited_s)
        ticket = source.peer_ticket(request.remote_addr)
        return Response(status=307, headers={"Location": f"{source.peer_url}?t={ticket}",
                                             "Cache-Control": "no-store"})

    def _busy(self, text: str, *, held: bool) -> Response:
        """A 503 for an image request: held (ask again at once) or plain (after Retry-After)."""
        return Response(
            text,
            status=f"503 {HELD_REASON}" if held else 503,
            mimetype="text/plain",
            headers={
                "Retry-After": "0" if held else str(self.retry_after_s),
                "Cache-Control": "no-store",
            },
        )

    def _pending(self) -> int:
        """Hosts being deployed that still need the image and are not asking for it now.

        Counted over every session at most once per half poll interval, whatever the number
        of idle peers asking: 400 idle peers would otherwise walk 512 sessions 800 times a
        second."""
        assert self.gate is not None
        with self._pending_lock:
            count, at = self._pending_memo
            if time.monotonic() - at < PEER_POLL_S / 2:
                return count
            asking = self.gate.asking()
            with self._lock:
                count = sum(1 for h, s in self._by_host.items()
                            if s.method == "image" and not (s.reports.keys() & {VERIFIED, *TERMINAL})
                            and _ticket_key(h) not in asking)
            self._pending_memo = (count, time.monotonic())
            return count

    def _on_peer(self, request: Request, host: str) -> Response:
        """A peer's long poll: "serve" while the gate wants it to (ask again), then "leave"."""
        s = self._host_session(request, host)
        s.check_token(self._bearer(request))
        gate, key = self.gate, _ticket_key(host)
        gone = _client_gone(request.environ)
        deadline = time.monotonic() + max(1.0, self.hold_s)
        while gate is not None and (busy := gate.peer_busy(key)) is not None:
            # what may still ask is counted only when the peer is idle (every session)
            if not busy and gate.peer_may_leave(key, self._pending()):
                break
            if time.monotonic() >= deadline or (gone is not None and gone()):
                return self._text("serve\n")
            time.sleep(PEER_POLL_S)
        log.info("host %s stops serving the image to peers", host)
        return self._text("leave\n")

    def _on_static(self, request: Request, name: str) -> Response:
        if name not in self.static:
            raise NotFound()
        return Response(self.static[name], mimetype="text/plain")

    def _on_config(self, request: Request, host: str) -> Response:
        return self._text(self._host_session(request, host).take_config(self._bearer(request)))

    @staticmethod
    def _bearer(request: Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        return auth[7:].strip() if auth.startswith("Bearer ") else None

    def _on_seed(self, request: Request, host: str, doc: str) -> Response:
        s = self._host_session(request, host)
        s.check_token(self._bearer(request))
        if doc not in s.seed:
            raise NotFound()
        return self._text(s.seed[doc])

    def _on_autoinstall(self, request: Request, host: str, key: str, doc: str) -> Response:
        s = self._host_session(request, host)
        text = s.autoinstall_doc(key, doc)
        if doc == "vendor-data":
            return self._text(text or "")
        if text is None:
            raise NotFound()
        return self._text(text)

    def _on_callback(self, request: Request, host: str, kind: str) -> Response:
        s = self._host_session(request, host)
        if kind not in KINDS:
            raise CallbackRefused(404, f"unknown callback {kind!r}")
        s.check_token(self._bearer(request))  # before a byte of the body is read
        body = self._read_body(request).decode("utf-8", errors="replace")
        next_boot = request.args.get("next", REBOOT) if kind == FINISHED else REBOOT
        s.report(kind, self._bearer(request), body, next_boot=next_boot)
        log.info("host %s reported %s", host, kind)
        if kind == VERIFIED:
            self._verified(s, request)
        return self._text("ok\n")

    def _verified(self, s: HostSession, request: Request) -> None:
        """A host has its whole image: a peer it downloaded from is free again, and the host
        serves peers itself when it offers to (``?serve=1``) and peer serving is on."""
        s.image_sent()
        if self.gate is None:
            return
        key = _ticket_key(s.host)
        self.gate.peer_done(key)
        if not (self.peer_serving and s.peer_key is not None and request.args.get("serve")):
            return
        address = s.address or plain_ip(request.remote_addr)
        host = f"[{address}]" if ":" in address else address
        s.peer_url = f"http://{host}:{s.peer_port}/cgi-bin/image"
        self.gate.add_peer(key, s.locality)
        log.info("host %s serves the image to peers", s.host)

    def _on_phone_home(self, request: Request, host: str, token: str) -> Response:
        self._host_session(request, host).phone_home(token)
        log.info("host %s booted its new OS (cloud-init phone-home)", host)
        return self._text("ok\n")

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Listen and serve in a daemon thread."""
        try:
            self._server = GuardedServer(self.bind, self.port, self.wsgi, _QuietHandler,
                                         max_connections=self.max_connections, logger=log)
        except OSError as exc:
            raise DeployError(
                f"deploy HTTP server cannot listen on {self.bind}:{self.port}",
                hint=(
                    "is another `provision` run or service using the port, or is the address "
                    "not configured on this machine? (settings.embedded.http_address/http_port)"
                ),
            ) from exc
        self.port = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="deploy-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
