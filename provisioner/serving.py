"""Threaded HTTP listeners that a hostile network cannot exhaust (werkzeug underneath).

The deploy server and the firmware image server listen on networks where anything may connect.
werkzeug's threaded server gives every connection a thread and waits on a socket for as long as
the peer likes; here:

- a request's line and headers must arrive within ``header_timeout_s`` *in all* (a client that
  trickles a byte at a time is cut as surely as a silent one);
- once the request is read, a socket that moves no byte either way for ``stall_timeout_s`` is
  dropped (an image stream whose reader stopped gives its thread and its stream back);
- an error inside the application is logged as one line, its exception's type alone;
- a port that cannot be bound raises ``OSError`` (werkzeug would print and exit);
- at most ``max_connections`` connections are served at once; one beyond gets a ``503`` with
  ``Retry-After`` and is closed without a thread, and the refusals are logged once per
  ``REFUSAL_LOG_S``.
"""

from __future__ import annotations

import io
import logging
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

log = logging.getLogger("provisioner.serving")

HEADER_TIMEOUT_S = 30.0
STALL_TIMEOUT_S = 120.0
MAX_CONNECTIONS = 1024
REFUSAL_LOG_S = 10.0
_REFUSAL_BODY = b"too many connections here; ask again\n"
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_REFUSAL_BODY), _REFUSAL_BODY)
)


class _RequestClock(io.RawIOBase):
    """A socket's reads; while ``deadline`` is set, each read waits only for what is left of
    it, so the request line and headers together get one budget."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sock.fileno()

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request line and headers took too long")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class GuardedHandler(WSGIRequestHandler):
    """werkzeug's handler with a deadline for the request head and a stall timeout after it."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    stall_timeout_s: float = STALL_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        self._clock = _RequestClock(self.connection)
        plain, self.rfile = self.rfile, io.BufferedReader(self._clock)
        plain.close()  # the socket stays open: only this reader of it goes

    def handle_one_request(self) -> None:
        self._clock.deadline = time.monotonic() + self.header_timeout_s
        super().handle_one_request()

    def run_wsgi(self) -> None:
        self._clock.deadline = None
        self.connection.settimeout(self.stall_timeout_s)
        super().run_wsgi()


class GuardedServer(ThreadedWSGIServer):
    """A threaded WSGI server serving at most ``max_connections`` connections at once."""

    def __init__(
        self,
        host: str,
        port: int,
        app: Any,
        handler: type[GuardedHandler] = GuardedHandler,
        *,
        max_connections: int = MAX_CONNECTIONS,
        logger: logging.Logger = log,
    ) -> None:
        self._bind_error: OSError | None = None
        super().__init__(host, port, app, handler)
        if self._bind_error is not None:
            self.server_close()
            raise self._bind_error
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._log = logger
        self.refused = 0  # connections refused for want of a slot, in all
        self._logged_at = -REFUSAL_LOG_S
        self._logged_count = 0

    # werkzeug prints a bind error and exits the process: kept here and raised instead
    def server_bind(self) -> None:
        try:
            super().server_bind()
        except OSError as exc:
            self._bind_error = exc

    def server_activate(self) -> None:
        if self._bind_error is None:
            try:
                super().server_activate()
            except OSError as exc:
                self._bind_error = exc

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started: its slot is free again
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    # Both calls below come from inside an `except`: socketserver would print a traceback to
    # stderr and werkzeug log one; one line naming the exception's type says enough, and its
    # text may quote a request line with a token in it.
    def handle_error(self, request: Any, client_address: Any) -> None:
        self._log.warning("connection from %s failed (%s)", _address(client_address),
                          _exception_name())

    def log(self, type: str, message: str, *args: Any) -> None:
        if type == "error":  # werkzeug: an application error, its client got a 500
            self._log.error("a request failed inside the server (%s); its client got a 500",
                            _exception_name())
        else:
            self._log.info("%s", (message % args if args else message)[:200])

    def _refuse(self, request: socket.socket) -> None:
        """A 503 and a close, from the accepting thread: never a wait on the client."""
        try:
            request.setblocking(False)
            request.send(_REFUSAL)
        except OSError:
            pass
        self.shutdown_request(request)
        self.refused += 1
        now = time.monotonic()
        if now - self._logged_at >= REFUSAL_LOG_S:
            self._log.warning(
                "refused %d connection(s): %d at once is this server's limit",
                self.refused - self._logged_count, self.max_connections)
            self._logged_at, self._logged_count = now, self.refused


def _exception_name() -> str:
    """The type of the exception being handled, without its text."""
    kind = sys.exc_info()[0]
    return kind.__name__ if kind else "unknown error"


def _address(client_address: Any) -> str:
    return str(client_address[0]) if isinstance(client_address, tuple) else "-"


def client_gone(sock: socket.socket) -> Callable[[], bool]:
    """A check, without waiting, that the client of a request being answered has closed its
    connection (it sends nothing while it waits for the answer: readable means EOF or reset)."""

    def gone() -> bool:
        poller = select.poll()
        try:
            poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
            if not poller.poll(0):
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    return gone
