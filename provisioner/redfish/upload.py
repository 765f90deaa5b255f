"""Request bodies that stream a file to a BMC (push firmware updates) without holding it in
memory: a raw octet stream, or multipart/form-data with JSON parts before the file.

Each body knows its length up front, so it is sent with Content-Length (BMCs differ in how
they take chunked uploads), and can be reopened to send it again.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20


class UploadBody:
    """A file-backed request body: ``read`` as http.client sends it, ``len`` for the
    Content-Length; ``reopen`` before every send."""

    content_type = "application/octet-stream"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._parts: list[bytes | Path] = [path]
        self._index = 0
        self._file: IO[bytes] | None = None

    def reopen(self) -> UploadBody:
        """Start from the first byte again."""
        self.close()
        self._index = 0
        return self

    def close(self) -> None:
        """Close the file being read, if any."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __len__(self) -> int:
        return sum(len(p) if isinstance(p, bytes) else p.stat().st_size for p in self._parts)

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (one part at most); b'' at the end."""
        size = CHUNK if size is None or size < 0 else size
        while self._index < len(self._parts):
            part = self._parts[self._index]
            if isinstance(part, bytes):
                self._index += 1
                if part:
                    return part  # the small text parts go out whole
                continue
            if self._file is None:
                self._file = part.open("rb")
            chunk = self._file.read(size)
            if chunk:
                return chunk
            self.close()
            self._index += 1
        return b""

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.read(CHUNK):
            yield chunk


class MultipartBody(UploadBody):
    """multipart/form-data: the JSON ``fields`` in order, then the file as ``file_field``."""

    def __init__(self, path: Path, fields: Sequence[tuple[str, Any]], *,
                 file_field: str = "UpdateFile") -> None:
        super().__init__(path)
        self.boundary = "----provisioner" + secrets.token_hex(16)
        self.content_type = f"multipart/form-data; boundary={self.boundary}"
        head = b"".join(
            self._header(name, "application/json") + json.dumps(value).encode() + b"\r\n"
            for name, value in fields)
        name = path.name.replace('"', "_").replace("\r", "_").replace("\n", "_")
        head += self._header(file_field, "application/octet-stream", filename=name)
        self._parts = [head, path, f"\r\n--{self.boundary}--\r\n".encode()]

    def _header(self, name: str, content_type: str, *, filename: str | None = None) -> bytes:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        return (f"--{self.boundary}\r\nContent-Disposition: {disposition}\r\n"
                f"Content-Type: {content_type}\r\n\r\n").encode()
