"""Progress of an image stream: bytes sent to a host so far, as events the front ends render."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from provisioner.events import Event, emit

EVERY_S = 1.0  # at most one event a second per stream: hundreds of hosts stream at once


def counted(
    body: Iterable[bytes], host: str, total: int | None, every_s: float = EVERY_S
) -> Iterator[bytes]:
    """Yield ``body`` unchanged, emitting "bytes" events for ``host`` as it goes out."""
    done = 0
    last = time.monotonic()
    emit(Event("bytes", host=host, phase="install", data={"done": 0, "total": total}))
    try:
        for chunk in body:
            done += len(chunk)
            now = time.monotonic()
            if now - last >= every_s:
                last = now
                emit(Event("bytes", host=host, phase="install", data={"done": done, "total": total}))
            yield chunk
    finally:
        # the end, whether the body was sent or the client went away
        complete = total is not None and done >= total
        data = {"done": done, "total": total, "complete": complete}
        emit(Event("bytes", host=host, phase="install", data=data))
        close = getattr(body, "close", None)
        if callable(close):
            close()
