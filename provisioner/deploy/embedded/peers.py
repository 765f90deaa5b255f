"""Hosts that serve the image to other hosts: the second source of image streams.

A host whose deploy ramdisk verified its image may serve the same bytes to hosts still waiting
(``settings.embedded.peer_serving``), so the image spreads by doubling instead of at the deploy
server's uplink alone. The :class:`~provisioner.deploy.embedded.gate.StreamGate` hands a waiting
host either one of its own streams or a free peer's; this module holds the peers and decides when
a peer may go on with its own deploy. It is not thread-safe by itself: the gate's lock guards it.

When a peer may leave (it serves nobody now, and then):
- it has served ``serve_max_s`` (its own deploy waits while it serves: bounded);
- or nobody waits and the idle sources (free server streams, idle peers) already outnumber the
  hosts that may still ask: more peers would only delay their own deploys;
- or it has been idle ``linger_s`` (a host that never comes up keeps counting as one that may
  still ask; a peer does not wait for it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

PEER_STREAMS = 1  # downloads one peer serves at once: one stream fills a host's link


@dataclass
class Peer:
    """One host serving the image."""

    key: str
    locality: str | None  # e.g. the rack: a same-rack peer spares the links above the rack
    since: float
    idle_since: float
    serving: set[str] = field(default_factory=set)  # keys of the hosts downloading from it
    started: dict[str, float] = field(default_factory=dict)  # downloader -> admitted at

    @property
    def free(self) -> int:
        return PEER_STREAMS - len(self.serving)


@dataclass
class PeerPool:
    """The peers of one gate, and the downloads each is serving."""

    linger_s: float = 10.0
    serve_max_s: float = 300.0
    stream_ttl_s: float = 600.0  # a download not reported within this frees its peer's slot
    peers: dict[str, Peer] = field(default_factory=dict)  # insertion order: when they joined
    _of: dict[str, str] = field(default_factory=dict)  # downloader key -> peer key
    admitted: int = 0  # downloads handed to peers, all time
    dropped: int = 0  # peers dropped after a download from them failed

    def add(self, key: str, locality: str | None, now: float) -> None:
        """A host serves the image from now (a second call changes nothing)."""
        if key not in self.peers:
            self.peers[key] = Peer(key, locality, now, now)

    def remove(self, key: str) -> None:
        """A peer stops serving: its downloads, if any, are no longer counted."""
        p = self.peers.pop(key, None)
        if p is not None:
            for downloader in p.serving:
                self._of.pop(downloader, None)

    def free_slots(self, now: float) -> int:
        """Downloads the peers could start now."""
        return sum(p.free for p in self._open(now))

    def pick(self, locality: str | None, now: float, *, same_only: bool = False) -> str | None:
        """A free peer for a host of ``locality``: one of the same locality first, then the one
        idle longest (spreads the load; the longest idle is the likeliest to leave)."""
        best: Peer | None = None
        for p in self._open(now):
            if locality is not None and p.locality == locality:
                return p.key
            if not same_only and (best is None or p.idle_since < best.idle_since):
                best = p
        return best.key if best is not None else None

    def take(self, peer: str, downloader: str, now: float) -> None:
        """``downloader`` streams from ``peer`` from now."""
        p = self.peers[peer]
        p.serving.add(downloader)
        p.started[downloader] = now
        self._of[downloader] = peer
        self.admitted += 1

    def done(self, downloader: str, now: float, *, failed: bool = False) -> str | None:
        """``downloader``'s download from its peer ended (``failed``: the peer is dropped, so
        nobody else is sent to it); returns the peer's key, None if it had none."""
        peer = self._of.pop(downloader, None)
        p = self.peers.get(peer) if peer is not None else None
        if p is None:
            return peer
        p.serving.discard(downloader)
        p.started.pop(downloader, None)
        if failed:
            self.dropped += 1
            self.remove(p.key)
        elif not p.serving:
            p.idle_since = now
        return peer

    def expire(self, now: float) -> None:
        """Free the slots of downloads never reported (their host vanished)."""
        for p in list(self.peers.values()):
            for downloader, at in list(p.started.items()):
                if now - at > self.stream_ttl_s:
                    self.done(downloader, now)

    def busy(self, key: str, now: float, *, waiting: bool) -> bool | None:
        """Whether peer ``key`` is needed now: it serves a host, or a host it may serve waits
        (``waiting``) and it has not served its time; None when ``key`` is not a peer."""
        p = self.peers.get(key)
        if p is None:
            return None
        if p.serving:
            return True
        # the gate hands a waiting host the next free peer (held) or at its next ask (polling)
        return waiting and now - p.since < self.serve_max_s

    def may_leave(self, key: str, now: float, *, waiting: bool, pending: int,
                  free_server: int) -> bool:
        """Whether peer ``key`` may stop serving now (see the module's docstring); True also for
        a key that is not (or no longer) a peer."""
        busy = self.busy(key, now, waiting=waiting)
        if busy is None:
            return True
        if busy:
            return False
        p = self.peers[key]
        if now - p.since >= self.serve_max_s:
            return True
        idle = free_server + self.free_slots(now)
        return idle > pending or now - p.idle_since >= self.linger_s

    def downloaders(self) -> list[str]:
        """Keys of the hosts downloading from peers now."""
        return list(self._of)

    def _open(self, now: float) -> Iterator[Peer]:
        """Peers that take new downloads: a free slot, and not past their serving time."""
        return (p for p in self.peers.values()
                if p.free > 0 and now - p.since < self.serve_max_s)
