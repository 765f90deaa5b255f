"""Admission of image streams: at most N hosts pull the image at once, first come first served.

Each host has a FIFO ticket, queued by its first request that finds every stream busy. A request
may then be *held* (a long poll): it waits inside the server for at most ``hold_s``, and the
moment a stream is released it is handed to the oldest held ticket, so a freed stream never
idles while a host waits. A held request whose hold runs out gets ``503`` and asks again at once,
keeping its ticket's place. Hosts that poll instead (no hold, or the hold slots are full) keep
their place too: a request is admitted only when its ticket is among the oldest ``free``. A
released stream, though, is handed only to held tickets (the oldest first): it never idles for a
polling host while another host waits in the server; the polling host, still ahead in the queue,
takes the next stream that is free when it asks.

A host retrying after a failed attempt has already paid a power cycle and its POST for the
stream it lost: :meth:`prefer` puts its next ticket ahead of every first attempt's (behind other
preferred ones, FIFO among them), so a retry never waits behind the whole rack's first attempts.

Peers (``settings.embedded.peer_serving``): a host whose image verified may serve it to others
(:mod:`~provisioner.deploy.embedded.peers`). A ticket asked with ``peers_ok`` may then be handed a
peer instead of one of the server's streams: a free peer of its own locality (rack) first, then
a server stream, then any free peer. A peer download ends with :meth:`peer_done` (the host
verified its image); the same host asking again meanwhile means that download failed, and the
peer is dropped. :meth:`peer_may_leave` says when a peer may go on with its own deploy.

Bounded: at most ``max_tickets`` tickets and ``max_held`` held requests (beyond: refused at once,
no ticket, no hold). Safe when a host vanishes: a ticket not renewed within ``ticket_ttl_s``
expires, a held request whose client went away gives its ticket up, and ``forget`` drops the
ticket of a host whose deploy ended (waking its held request).

The gate never blocks by itself: :meth:`hold` registers a wake-up callback that the gate calls
when it hands the request a stream, so the waiting is the caller's (the HTTP server waits on a
threading.Event in :meth:`admit`; the benchmark waits on its virtual clock with the same gate).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from provisioner.deploy.base import StreamStats
from provisioner.deploy.embedded.peers import PeerPool

SERVER = ""  # the source of a stream from the server itself (else a peer's key)


@dataclass(frozen=True)
class Admission:
    """The gate's answer to one request for a stream."""

    admitted: bool
    active: int  # streams in use after this decision
    position: int  # 0 when admitted; else 1-based place in the queue (0: no ticket, queue full)
    waited_s: float  # since the ticket was first queued
    held: bool = False  # refused after waiting inside the server (a long poll): ask again at once
    source: str | None = None  # admitted from this peer (its key); None: the server's own stream


@dataclass
class Hold:
    """A request waiting inside the server for a stream (see :meth:`StreamGate.hold`)."""

    key: str
    wake: Callable[[], None]
    admission: Admission | None = None  # set when the gate hands it a stream
    cancelled: bool = False


@dataclass
class _Ticket:
    first: float  # first asked
    last: float  # last asked (renewed by every request and while held)
    holds: list[Hold] = field(default_factory=list)
    peers_ok: bool = False  # may be sent to a peer (a host being deployed, peer serving on)
    locality: str | None = None  # its rack: a peer of the same one is preferred


class StreamGate:
    """A counting gate with a FIFO ticket queue and direct hand-over; thread-safe."""

    def __init__(
        self,
        limit: int,
        *,
        ticket_ttl_s: float = 60.0,
        max_tickets: int = 4096,
        max_held: int = 512,
        clock: Callable[[], float] = time.monotonic,
        peers: PeerPool | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("a stream gate needs a limit of at least 1")
        self.limit = limit
        self.ticket_ttl_s = ticket_ttl_s
        self.max_tickets = max_tickets
        self.max_held = max_held
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: OrderedDict[str, _Ticket] = OrderedDict()  # insertion order = queue order
        self._preferred: set[str] = set()  # keys whose ticket goes ahead of first attempts
        self._active: dict[str, list[float]] = {}  # key -> admission times of its streams
        self._held = 0
        self._admitted = 0
        self._wait_total = 0.0
        self._streams_done = 0
        self._stream_total = 0.0
        self._pool = peers if peers is not None else PeerPool()

    @property
    def active(self) -> int:
        """Streams in use."""
        with self._lock:
            return self._in_use()

    def waiting(self) -> list[str]:
        """Keys of the queued tickets, oldest first (expired ones dropped)."""
        with self._lock:
            self._expire(self._clock())
            return list(self._queue)

    def stats(self) -> StreamStats:
        """Counters and means since the gate was made."""
        with self._lock:
            done = self._streams_done
            return StreamStats(
                limit=self.limit,
                active=self._in_use(),
                waiting=len(self._queue),
                held=self._held,
                admitted=self._admitted,
                mean_wait_s=self._wait_total / self._admitted if self._admitted else 0.0,
                mean_stream_s=self._stream_total / done if done else 0.0,
                peers=len(self._pool.peers),
                peer_streams=len(self._pool.downloaders()),
                peer_admitted=self._pool.admitted,
            )

    # -- asking -----------------------------------------------------------------------------

    def try_admit(self, key: str, *, peers_ok: bool = False,
                  locality: str | None = None) -> Admission:
        """Take a stream for ``key`` if one is free and no older ticket may take it; never waits.

        ``peers_ok``: a peer may serve it (``locality``: its rack, for a near peer)."""
        with self._lock:
            answer, _ = self._ask(key, None, peers_ok, locality)
            return answer

    def hold(self, key: str, wake: Callable[[], None], *, peers_ok: bool = False,
             locality: str | None = None) -> Hold:
        """Ask for a stream; if none is free now, wait for one inside the gate.

        Returns a Hold whose ``admission`` is set at once (admitted, or refused without a hold
        when the hold slots or the queue are full) or later, just before ``wake()`` is called
        (outside the gate's lock). The caller must end a hold that is still waiting with
        :meth:`cancel`.
        """
        h = Hold(key, wake)
        with self._lock:
            answer, queued = self._ask(key, h if self._held < self.max_held else None, peers_ok,
                                       locality)
            if not queued:
                h.admission = answer
        return h

    def cancel(self, h: Hold, *, gone: bool = False) -> Admission:
        """End a hold: its admission if a stream was handed to it meanwhile, else a held refusal.

        ``gone``: the client went away; its ticket is dropped instead of keeping its place.
        """
        with self._lock:
            if h.admission is not None:
                return h.admission
            now = self._clock()
            h.cancelled = True
            self._held -= 1
            t = self._queue.get(h.key)
            if t is not None:
                if h in t.holds:
                    t.holds.remove(h)
                t.last = now
                if gone and not t.holds:
                    del self._queue[h.key]
            position = list(self._queue).index(h.key) + 1 if h.key in self._queue else 0
            first = t.first if t is not None else now
            h.admission = Admission(False, self._in_use(), position, now - first, held=True)
            return h.admission

    def admit(
        self,
        key: str,
        hold_s: float,
        *,
        gone: Callable[[], bool] | None = None,
        poll_s: float = 1.0,
        peers_ok: bool = False,
        locality: str | None = None,
    ) -> Admission:
        """Blocking form of :meth:`hold` for a server thread: wait up to ``hold_s`` real seconds.

        ``gone()`` is checked every ``poll_s`` while waiting: True (the client disconnected)
        gives the ticket up.
        """
        if hold_s <= 0:
            return self.try_admit(key, peers_ok=peers_ok, locality=locality)
        event = threading.Event()
        h = self.hold(key, event.set, peers_ok=peers_ok, locality=locality)
        if h.admission is not None:
            return h.admission
        deadline = time.monotonic() + hold_s
        while True:
            left = deadline - time.monotonic()
            if event.wait(max(0.0, min(poll_s, left))):
                assert h.admission is not None
                return h.admission
            if gone is not None and gone():
                return self.cancel(h, gone=True)
            if left <= poll_s:
                return self.cancel(h)

    def prefer(self, key: str) -> None:
        """Put ``key``'s ticket (now or when it first asks) ahead of every ticket not preferred,
        until it takes a stream or is forgotten: a retry after a failed attempt."""
        with self._lock:
            if key not in self._preferred and len(self._preferred) >= self.max_tickets:
                return  # bounded like the queue: beyond it, a retry queues as a first attempt
            self._preferred.add(key)
            if key in self._queue:
                self._reorder()

    # -- giving back ------------------------------------------------------------------------

    def release(self, key: str) -> None:
        """Give back one stream taken by ``key``; hand it to the oldest held ticket at once."""
        with self._lock:
            now = self._clock()
            started = self._active.get(key)
            if started:
                self._streams_done += 1
                self._stream_total += now - started.pop(0)
                if not started:
                    del self._active[key]
            woken = self._hand_over(now)
        for h in woken:
            h.wake()

    def forget(self, key: str) -> None:
        """Drop ``key``'s ticket (its deploy ended), ending its held requests, and its place as
        a peer or a peer's downloader; server streams it holds are released on close."""
        woken: list[Hold] = []
        with self._lock:
            self._preferred.discard(key)
            now = self._clock()
            self._pool.remove(key)
            self._pool.done(key, now)
            t = self._queue.pop(key, None)
            if t is not None:
                for h in t.holds:
                    self._held -= 1
                    h.cancelled = True
                    h.admission = Admission(False, self._in_use(), 0, now - t.first, held=True)
                    woken.append(h)
            woken += self._hand_over(now)
        for h in woken:
            h.wake()

    # -- peers ------------------------------------------------------------------------------

    def add_peer(self, key: str, locality: str | None = None) -> None:
        """``key``'s host serves the image from now; held requests may be handed to it at once."""
        with self._lock:
            now = self._clock()
            self._pool.add(key, locality, now)
            woken = self._hand_over(now)
        for h in woken:
            h.wake()

    def peer_done(self, key: str) -> str | None:
        """``key``'s download from a peer ended well (it verified its image): the peer is free
        for the next host. Returns the peer's key (None: ``key`` had no peer download)."""
        with self._lock:
            now = self._clock()
            peer = self._pool.done(key, now)
            woken = self._hand_over(now) if peer is not None else []
        for h in woken:
            h.wake()
        return peer

    def peer_busy(self, key: str) -> bool | None:
        """Whether peer ``key`` serves a host or a host it may serve is waiting (cheap: no need to
        ask whether it may leave); None when ``key`` is not a peer."""
        with self._lock:
            return self._pool.busy(key, self._clock(), waiting=self._waiting_for_peers())

    def peer_may_leave(self, key: str, pending: int) -> bool:
        """Whether peer ``key`` may stop serving now; if so it is no longer a peer. ``pending``:
        hosts that will still ask for the image and are not asking now."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            if not self._pool.may_leave(key, now, waiting=self._waiting_for_peers(),
                                        pending=pending, free_server=self.limit - self._in_use()):
                return False
            self._pool.remove(key)
            return True

    def asking(self) -> set[str]:
        """Keys queued, streaming from the server, or downloading from a peer now."""
        with self._lock:
            return {*self._queue, *self._active, *self._pool.downloaders()}

    def peers(self) -> dict[str, list[str]]:
        """Each peer's key and the keys of the hosts downloading from it now."""
        with self._lock:
            return {k: sorted(p.serving) for k, p in self._pool.peers.items()}

    # -- inside the lock --------------------------------------------------------------------

    def _waiting_for_peers(self) -> bool:
        """Whether a queued host may be sent to a peer."""
        return any(t.peers_ok for t in self._queue.values())

    def _in_use(self) -> int:
        return sum(len(v) for v in self._active.values())

    def _take(self, key: str, t: _Ticket | None, now: float, source: str) -> None:
        self._preferred.discard(key)
        if source == SERVER:
            self._active.setdefault(key, []).append(now)
        else:
            self._pool.take(source, key, now)
        self._admitted += 1
        self._wait_total += now - (t.first if t is not None else now)

    def _ask(self, key: str, h: Hold | None, peers_ok: bool = False,
             locality: str | None = None) -> tuple[Admission, bool]:
        """One request of ``key``: admitted, or refused (queued with ``h`` when given)."""
        now = self._clock()
        self._expire(now)
        # a host asks again only when its stream broke or did not verify: from a peer, that
        # peer is suspect and gets nobody else
        self._pool.done(key, now, failed=True)
        t = self._queue.get(key)
        if t is None:
            if len(self._queue) >= self.max_tickets:
                return Admission(False, self._in_use(), 0, 0.0), False
            t = self._queue[key] = _Ticket(now, now)
            if key in self._preferred:
                self._reorder()
        t.last = now  # an existing ticket keeps its place
        t.peers_ok, t.locality = peers_ok, locality
        source = self._source_for(key, t, now)
        in_use = self._in_use()
        if source is not None:
            del self._queue[key]
            self._take(key, t, now, source)
            return Admission(True, self._in_use(), 0, now - t.first,
                             source=source or None), False
        position = list(self._queue).index(key)
        if h is None:
            return Admission(False, in_use, position + 1, now - t.first), False
        t.holds.append(h)
        self._held += 1
        return Admission(False, in_use, position + 1, now - t.first), True

    def _source_for(self, key: str, t: _Ticket, now: float) -> str | None:
        """The source ``key``'s ticket takes now (SERVER or a peer's key), or None: the free
        ones are kept for older tickets (each older one keeps one it can use)."""
        server = self.limit - self._in_use()
        peers = self._pool.free_slots(now)
        for k, other in self._queue.items():
            if k == key or (server <= 0 and peers <= 0):
                break
            if other.peers_ok and peers > 0:
                peers -= 1
            elif server > 0:
                server -= 1
        return self._choose(t, server, peers, now)

    def _choose(self, t: _Ticket, server: int, peers: int, now: float) -> str | None:
        """A peer of the ticket's own rack, else a server stream, else any free peer."""
        if t.peers_ok and peers > 0:
            near = self._pool.pick(t.locality, now, same_only=True)
            if near is not None:
                return near
        if server > 0:
            return SERVER
        if t.peers_ok and peers > 0:
            return self._pool.pick(t.locality, now)
        return None

    def _hand_over(self, now: float) -> list[Hold]:
        """Give free sources to the oldest held tickets; the holds to wake."""
        self._expire(now)
        woken: list[Hold] = []
        server = self.limit - self._in_use()
        peers = self._pool.free_slots(now)
        for key in list(self._queue):
            if server <= 0 and peers <= 0:
                break
            t = self._queue[key]
            if not t.holds:
                continue  # polling: it gets a stream when it asks while one is free
            source = self._choose(t, server, peers, now)
            if source is None:
                continue  # no source it may use (a peer, for a host not sent to peers)
            if source == SERVER:
                server -= 1
            else:
                peers -= 1
            h = t.holds.pop(0)
            self._held -= 1
            self._take(key, t, now, source)
            h.admission = Admission(True, self._in_use(), 0, now - t.first,
                                    source=source or None)
            for extra in t.holds:  # a second request of the same host: refused, ticket gone
                self._held -= 1
                extra.cancelled = True
                extra.admission = Admission(False, self._in_use(), 0, now - t.first, held=True)
                woken.append(extra)
            del self._queue[key]
            woken.insert(0, h)
        return woken

    def _reorder(self) -> None:
        """Preferred tickets first, each group in its own order (a retry is rare: O(queue))."""
        ahead = [k for k in self._queue if k in self._preferred]
        for k in reversed(ahead):
            self._queue.move_to_end(k, last=False)

    def _expire(self, now: float) -> None:
        self._pool.expire(now)
        # a held ticket is renewed while it waits: only hosts that stopped asking expire
        stale = [
            k for k, t in self._queue.items() if not t.holds and now - t.last > self.ticket_ttl_s
        ]
        for k in stale:
            del self._queue[k]
