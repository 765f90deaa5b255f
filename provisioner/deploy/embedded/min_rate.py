"""A floor under the rate at which a client takes an image stream: a reader that takes the stream
and then reads slowly (or not at all) is cut, so the stream goes back to the gate for a host that
reads at its link rate.

What is measured is the client's share of the time only: the time the server waits for its writes
to the client (a full socket buffer means the client is not taking the bytes). Time the server
spends producing the bytes (reading the image from a slow or busy disk, a loaded machine) does
not count against the client. Each window of ``window_s`` of that waiting must carry at least
``min_bps x window_s`` bytes; windows are consecutive, so a fast start buys no credit for a slow
tail. A reader that stops altogether blocks one write; the socket's timeout (one window, or the
time one chunk takes at the floor when that is longer) cuts that write.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger("provisioner.deploy.http")

DEFAULT_WINDOW_S = 30.0


class StreamTooSlow(TimeoutError):
    """A client took fewer bytes than the floor in one window. A ``TimeoutError``: the HTTP
    server treats it as a dropped connection (closes it, no 500, no traceback)."""


def at_least(
    body: Iterable[bytes],
    *,
    min_bps: float,
    window_s: float = DEFAULT_WINDOW_S,
    sock: socket.socket | None = None,
    what: str = "an image stream",
    setting: str = "settings.embedded.image_min_rate_mbps",
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[bytes]:
    """Yield ``body``; raise :class:`StreamTooSlow` when the client took less than the floor
    over a window of the time the server waited for it."""
    if min_bps <= 0:
        yield from body
        return
    waited = 0.0  # seconds this window spent in the client's writes
    moved = 0
    timed = False
    for chunk in body:
        if waited >= window_s:
            if moved < min_bps * waited:
                log.warning(
                    "%s cut: the client took %d bytes in %.0f s, below the floor of %.0f "
                    "bytes/s (%s)", what, moved, waited, min_bps, setting)
                raise StreamTooSlow(f"{what} read below {min_bps:.0f} bytes/s")
            log.debug("%s: %.0f bytes/s over the last %.0f s", what, moved / waited, waited)
            waited, moved = 0.0, 0
        if sock is not None and not timed:
            # the write of one chunk may take at most a window (or the chunk's time at the floor)
            sock.settimeout(max(window_s, len(chunk) / min_bps))
            timed = True
        before = clock()
        yield chunk  # the server writes it to the client meanwhile
        waited += clock() - before
        moved += len(chunk)
