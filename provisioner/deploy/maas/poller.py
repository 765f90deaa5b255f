"""Machine states for many waiting hosts from one MAAS request per poll interval.

A rack of hundreds of hosts waiting on commissioning or deployment would otherwise send
one ``GET /machines/{id}/`` per host per interval; MAAS renders each machine with dozens of
joins, so one filtered ``GET /machines/?id=...&id=...`` for all of them is much lighter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.errors import MAASNotFound
from provisioner.deploy.maas.models import Machine


class StatePoller:
    """Thread-safe; ``read`` returns a machine at most ``max_age_s`` old."""

    def __init__(self, client: MAASClient, *, max_age_s: float, clock: Callable[[], float]) -> None:
        self._client = client
        self._max_age = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self._cache: dict[str, tuple[float, Machine]] = {}
        self.requests = 0  # MAAS reads made (for tests and benchmarks)

    def read(self, system_id: str, *, fresh: bool = False) -> Machine:
        """The machine's state; ``fresh`` skips the cache (right after an action on it)."""
        with self._lock:
            self._watched.add(system_id)
            cached = self._cache.get(system_id)
            if cached and not fresh and self._clock() - cached[0] < self._max_age:
                return cached[1]
            # One request refreshes every machine someone is waiting on.
            machines = self._client.machines(system_ids=sorted(self._watched))
            self.requests += 1
            now = self._clock()
            for m in machines:
                self._cache[m.system_id] = (now, m)
            found = {m.system_id for m in machines}
            for sid in self._watched - found:
                self._cache.pop(sid, None)
            if system_id not in found:
                self._watched.discard(system_id)
                raise MAASNotFound(
                    f"MAAS machine {system_id} disappeared while being waited on",
                    system_id=system_id,
                    hint="someone deleted it in MAAS; run again to enlist the host anew",
                )
            return self._cache[system_id][1]

    def forget(self, system_id: str) -> None:
        """Stop refreshing a machine nobody waits on any more."""
        with self._lock:
            self._watched.discard(system_id)
            self._cache.pop(system_id, None)
