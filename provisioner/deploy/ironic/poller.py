"""Node states for many waiting hosts from one Ironic list call per poll interval.

A rack of hundreds of hosts waiting on deploys would otherwise send one ``GET /v1/nodes/{id}``
per host per interval. One ``GET /v1/nodes?fields=...`` (filtered by conductor group when
every watched node shares one) returns them all, a dozen fields each.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.errors import IronicNotFound

FIELDS = ("uuid", "name", "provision_state", "target_provision_state", "power_state",
          "maintenance", "maintenance_reason", "last_error", "fault", "conductor_group",
          "inspection_finished_at", "provision_updated_at")


class NodePoller:
    """Thread-safe; ``read`` returns a node at most ``max_age_s`` old."""

    def __init__(self, client: IronicClient, *, max_age_s: float,
                 clock: Callable[[], float]) -> None:
        self._client = client
        self._max_age = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: dict[str, str | None] = {}  # uuid -> conductor group
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self.reads = 0  # node states handed to waiters
        self.polls = 0  # list reads made for them (tests and benchmarks)
        self.pages = 0  # list requests those reads needed

    def watch(self, uuid: str, *, group: str | None = None) -> None:
        """Read the node in every list call from now on: a waiter registers before its first
        pause, so that other waiters' list calls during the pause answer its first read too
        (registered only at that read, every wait's first read cost a list call of its own)."""
        with self._lock:
            self._watched[uuid] = group

    def read(self, uuid: str, *, group: str | None = None, since: float | None = None
             ) -> dict[str, Any]:
        """The node's state fields, read at most ``max_age_s`` ago; with ``since`` (right after
        an action) read by a list call sent after that moment: threads that acted while one
        list call was under way share the next one."""
        with self._lock:
            self.reads += 1
            self._watched[uuid] = group
            cached = self._cache.get(uuid)
            if cached and (cached[0] >= since if since is not None
                           else self._clock() - cached[0] < self._max_age):
                return cached[1]
            sent = self._clock()
            groups = set(self._watched.values())
            only = next(iter(groups)) if len(groups) == 1 else None
            filters = {"conductor_group": only} if only else {}
            nodes, pages = self._client.list_nodes(FIELDS, **filters)
            self.polls += 1
            self.pages += pages
            now = sent  # the nodes are at least this fresh
            seen = set()
            for n in nodes:
                nid = str(n.get("uuid"))
                seen.add(nid)
                if nid in self._watched:
                    self._cache[nid] = (now, n)
            for nid in set(self._watched) - seen:
                self._cache.pop(nid, None)
            if uuid not in seen:
                self._watched.pop(uuid, None)
                raise IronicNotFound(
                    f"Ironic node {uuid} disappeared while being waited on", node=uuid,
                    hint="someone deleted it in Ironic; run again to enrol the host anew")
            return self._cache[uuid][1]

    def forget(self, uuid: str) -> None:
        """Stop refreshing a node nobody waits on any more."""
        with self._lock:
            self._watched.pop(uuid, None)
            self._cache.pop(uuid, None)
