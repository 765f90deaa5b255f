"""Origins and loggable URLs: what the policy compares and what messages show."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def loggable_url(url: str) -> str:
    """A URL without user info, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is no port: shown as written, minus user info
        port = None
        host = parts.netloc.rpartition("@")[2]
    netloc = f"{host}:{port}" if port else host
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


def origin(url: str) -> tuple[str, str, int] | None:
    """Scheme, host and port of a URL (the scheme's port when none is written); None when
    its port is no port."""
    parts = urlsplit(url)
    try:
        return parts.scheme.lower(), (parts.hostname or "").lower(), _port(parts)
    except ValueError:
        return None


def has_user_info(url: str) -> bool:
    """Whether a URL names user info (``user:pw@host``): such a URL is never sent, since a
    path appended to a base URL can turn the base's host into user info."""
    parts = urlsplit(url)
    return parts.username is not None or "@" in parts.netloc


def same_origin(base: str, url: str) -> bool:
    """Whether ``url`` is on the very origin of ``base`` (scheme, host and port)."""
    mine = origin(base)
    return mine is not None and bool(mine[1]) and origin(url) == mine and not has_user_info(url)


def redirect_allowed(base: str, target: str, *, upgrade_to_https: bool = False) -> bool:
    """Whether a redirect to ``target`` stays with the peer ``base`` names: the same origin,
    or with ``upgrade_to_https`` the same host's https (its own https port, or 443 from http).

    Another port of the same address may be another peer (a chassis manager's nodes, a
    port-forwarding jump host): it gets nothing.
    """
    if has_user_info(target):
        return False
    src, dst = origin(base), origin(target)
    if src is None or dst is None or not dst[1] or dst[1] != src[1]:
        return False
    if dst == src:
        return True
    if not upgrade_to_https or dst[0] != "https":
        return False
    return dst[2] == (src[2] if src[0] == "https" else 443)
