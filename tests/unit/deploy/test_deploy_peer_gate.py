"""The stream gate with peers: hosts whose image verified serve it to waiting hosts.

Checked: a waiting host is handed a free peer when the server's streams are busy, a peer of its
own rack before a server stream, a server stream before a far peer; hosts not sent to peers
never are; a failed peer download drops the peer; a vanished peer or downloader frees what it
held; and when a peer may go on with its own deploy.
"""

from __future__ import annotations

from provisioner.deploy.embedded.gate import StreamGate
from provisioner.deploy.embedded.peers import PeerPool


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def gate_with(limit: int = 1, **pool: float) -> tuple[StreamGate, Clock]:
    clock = Clock()
    return StreamGate(limit, clock=clock, peers=PeerPool(**pool)), clock


def test_a_held_host_is_handed_a_peer_when_the_servers_streams_are_busy() -> None:
    gate, clock = gate_with(1)
    assert gate.try_admit("a", peers_ok=True).source is None  # the server's own stream
    woke: list[str] = []
    b = gate.hold("b", lambda: woke.append("b"), peers_ok=True)
    c = gate.hold("c", lambda: woke.append("c"), peers_ok=True)
    assert b.admission is None and c.admission is None
    clock.now = 3.0
    gate.release("a")  # a's stream ends: the server's stream goes to b
    assert woke == ["b"] and b.admission is not None and b.admission.source is None
    gate.add_peer("a")  # a verified and serves: c gets it at once
    assert woke == ["b", "c"] and c.admission is not None and c.admission.admitted
    assert c.admission.source == "a" and c.admission.waited_s == 3.0
    assert gate.peers() == {"a": ["c"]}
    stats = gate.stats()
    assert (stats.active, stats.peers, stats.peer_streams, stats.peer_admitted) == (1, 1, 1, 1)
    # c verified: the peer is free for the next host
    assert gate.peer_done("c") == "a"
    assert gate.peers() == {"a": []}
    d = gate.try_admit("d", peers_ok=True)
    assert d.admitted and d.source == "a"


def test_a_peer_of_the_same_rack_first_then_the_server_then_a_far_peer() -> None:
    gate, _ = gate_with(1)
    gate.add_peer("r1-peer", "r1")
    gate.add_peer("r2-peer", "r2")
    assert gate.try_admit("r2-host", peers_ok=True, locality="r2").source == "r2-peer"
    assert gate.try_admit("r3-host", peers_ok=True, locality="r3").source is None  # server
    # the server is busy now: a far peer rather than waiting
    assert gate.try_admit("r4-host", peers_ok=True, locality="r4").source == "r1-peer"
    assert not gate.try_admit("r5-host", peers_ok=True, locality="r5").admitted


def test_a_host_not_sent_to_peers_never_is_and_does_not_block_one_that_may() -> None:
    gate, _ = gate_with(1)
    assert gate.try_admit("busy").admitted
    assert not gate.try_admit("bare").admitted  # e.g. a request without ?host=
    gate.add_peer("p")
    # the older ticket may not use the peer: it waits for the server, the younger one goes on
    assert not gate.try_admit("bare").admitted
    younger = gate.try_admit("host", peers_ok=True)
    assert younger.admitted and younger.source == "p"
    gate.release("busy")
    assert gate.try_admit("bare").source is None


def test_asking_again_during_a_peer_download_drops_that_peer() -> None:
    gate, _ = gate_with(1)
    assert gate.try_admit("busy").admitted
    gate.add_peer("bad")
    gate.add_peer("good")
    first = gate.try_admit("h", peers_ok=True)
    assert first.source in ("bad", "good")
    suspect = first.source
    # its stream broke or did not verify: it asks again; the suspect peer serves nobody else
    again = gate.try_admit("h", peers_ok=True)
    other = {"bad", "good"} - {suspect}
    assert again.admitted and again.source in other
    assert suspect not in gate.peers()
    assert gate.peer_may_leave(str(suspect), pending=5)  # a dropped peer goes on at once


def test_a_vanished_peer_or_downloader_frees_what_it_held() -> None:
    gate, _ = gate_with(1)
    assert gate.try_admit("busy").admitted
    gate.add_peer("p")
    assert gate.try_admit("d1", peers_ok=True).source == "p"
    gate.forget("d1")  # d1's deploy ended (failed): p is free again
    assert gate.try_admit("d2", peers_ok=True).source == "p"
    gate.forget("p")  # p's deploy ended: no longer a peer; d2's slot goes with it
    assert gate.peers() == {}
    assert not gate.try_admit("d3", peers_ok=True).admitted


def test_a_download_never_reported_frees_its_peer_after_the_ttl() -> None:
    gate, clock = gate_with(1, stream_ttl_s=100.0)
    assert gate.try_admit("busy").admitted
    gate.add_peer("p")
    assert gate.try_admit("silent", peers_ok=True).source == "p"
    assert not gate.try_admit("next", peers_ok=True).admitted
    clock.now = 101.0
    assert gate.try_admit("next", peers_ok=True).source == "p"


def test_when_a_peer_may_go_on_with_its_own_deploy() -> None:
    gate, clock = gate_with(1, linger_s=10.0, serve_max_s=300.0)
    assert gate.try_admit("busy").admitted
    gate.add_peer("p")
    assert gate.try_admit("d", peers_ok=True).source == "p"
    assert not gate.peer_may_leave("p", pending=0)  # serving
    gate.peer_done("d")
    # idle, nobody waiting, more hosts may still ask than there are idle sources: it lingers
    clock.now = 5.0
    assert not gate.peer_may_leave("p", pending=3)
    clock.now = 10.5
    assert gate.peer_may_leave("p", pending=3) and gate.peers() == {}


def test_an_idle_peer_leaves_at_once_when_the_sources_outnumber_what_may_still_ask() -> None:
    gate, _ = gate_with(1)
    assert gate.try_admit("busy").admitted
    for p in ("p1", "p2", "p3"):
        gate.add_peer(p)
    # three idle peers, one host may still ask: two of them are not needed
    assert gate.peer_may_leave("p1", pending=1)
    assert gate.peer_may_leave("p2", pending=1)
    assert not gate.peer_may_leave("p3", pending=1)
    assert gate.peer_may_leave("p3", pending=0) and gate.peers() == {}


def test_a_waiting_host_keeps_an_idle_peer_and_serving_time_is_bounded() -> None:
    gate, clock = gate_with(1, serve_max_s=60.0)
    assert gate.try_admit("busy").admitted
    assert not gate.try_admit("bare").admitted  # waits for the server, cannot use peers
    assert not gate.try_admit("w", peers_ok=True).admitted
    gate.add_peer("p")  # w polls: it takes p when it asks again
    assert gate.peer_busy("p") is True  # a host it may serve waits
    assert not gate.peer_may_leave("p", pending=0)
    assert gate.try_admit("w", peers_ok=True).source == "p"
    assert gate.peer_busy("p") is True  # serving w
    clock.now = 61.0  # served its time: takes nobody new, leaves once idle
    assert not gate.try_admit("x", peers_ok=True).admitted
    assert not gate.peer_may_leave("p", pending=9)
    gate.peer_done("w")
    assert gate.peer_busy("p") is False  # x waits, but p has served its time
    assert gate.peer_may_leave("p", pending=9)
    assert gate.peer_busy("p") is None


def test_idle_peers_polling_together_count_the_sessions_once_per_interval(monkeypatch) -> None:
    from provisioner.deploy.embedded import http as deploy_http
    from provisioner.deploy.embedded.http import DeployServer
    from provisioner.deploy.embedded.sessions import HostSession

    server = DeployServer(bind="127.0.0.1", port=0, public_url="", max_image_streams=2,
                          peers=PeerPool())
    for i in range(3):
        server.register(HostSession(host=f"h{i}", mac=f"52:54:00:00:00:0{i}", method="image",
                                    ipxe_script=""))
    assert server.gate is not None
    walks = 0
    asking = server.gate.asking

    def counted() -> set[str]:
        nonlocal walks
        walks += 1
        return asking()

    monkeypatch.setattr(server.gate, "asking", counted)
    now = [1000.0]
    monkeypatch.setattr(deploy_http.time, "monotonic", lambda: now[0])
    assert [server._pending() for _ in range(400)] == [3] * 400  # 400 idle peers, one poll each
    assert walks == 1
    server.unregister("h0")
    now[0] += deploy_http.PEER_POLL_S / 2  # the next poll round sees the change
    assert server._pending() == 2 and walks == 2
