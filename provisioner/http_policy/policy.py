"""The limits one client puts on its peer's answers."""

from __future__ import annotations

from dataclasses import dataclass

# What a JSON API answers at most (Redfish BIOS registries and $expand-ed collections run to
# a few MB); a client reading something larger (an image) says so.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
# One answer, however it trickles in (the read timeout restarts with every byte): 16 MiB at
# 55 kB/s. Without it a peer dripping a byte a second holds a verb for ever.
DEFAULT_ANSWER_WALL_S = 300.0
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class HttpPolicy:
    """How much of an answer is read, for how long, and where a redirect may go.

    ``proxy``: the one proxy to use (a URL), only when the site names one; the environment's
    HTTP(S)_PROXY is never read. ``upgrade_to_https``: also follow a redirect from http to
    the same host's https (a BMC's usual hop); otherwise only the very origin is followed.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    answer_wall_s: float = DEFAULT_ANSWER_WALL_S
    max_redirects: int = MAX_REDIRECTS
    proxy: str | None = None
    upgrade_to_https: bool = False

    def proxies(self) -> dict[str, str]:
        """The ``proxies`` mapping requests is given: empty unless the policy names one."""
        return {"http": self.proxy, "https": self.proxy} if self.proxy else {}
