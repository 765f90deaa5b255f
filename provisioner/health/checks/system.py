"""Host checks that apply to every host: disk use, ZFS + Docker, kernel-log lines off the allow-list."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provisioner.health.checks.base import Context, missing_tool, not_applicable, result
from provisioner.health.collector import Section
from provisioner.health.config import DEFAULT_KERNEL_ALLOW
from provisioner.health.errors import ParseError
from provisioner.health.jsontext import find_json
from provisioner.health.model import CheckResult, RemedyKind, Status
from provisioner.health.pcie import parse_bandwidth_warnings
from provisioner.health.xid import parse_kernel_log


@dataclass(frozen=True)
class Mount:
    """One ``df -P -B1`` line."""

    source: str
    size: int
    used: int
    mountpoint: str

    @property
    def use_pct(self) -> float:
        """Used share of the filesystem, as df counts it (used / (used + available))."""
        return 100.0 * self.used / self.size if self.size else 0.0


def parse_df(text: str) -> list[Mount]:
    """``df -P -B1`` -> mounts; raises ParseError without the POSIX header."""
    lines = text.splitlines()
    # df prints "df: /mnt/nfs: Stale file handle" on stderr (merged here) before its header.
    header = next((i for i, ln in enumerate(lines) if ln.startswith("Filesystem")), None)
    if header is None:
        raise ParseError("df -P", "no 'Filesystem' header line")
    out = []
    for line in lines[header + 1:]:
        parts = line.split(None, 5)
        # ASCII digits, bounded: "²".isdigit() is True and int() refuses 4,300+ digits
        if len(parts) == 6 and all(re.fullmatch(r"[0-9]{1,30}", p) for p in parts[1:4]):
            used, avail = int(parts[2]), int(parts[3])
            out.append(Mount(parts[0], used + avail, used, parts[5]))
    return out


def check_disk(ctx: Context) -> CheckResult:
    """Every local filesystem below the fail threshold (95% by default)."""
    cid = "disk.usage"
    sec = ctx.section("df")
    if sec is None or not sec.text:
        return result(cid, Status.ERROR, "df printed nothing")
    try:
        mounts = parse_df(sec.text)
    except ParseError as exc:
        return result(cid, Status.ERROR, str(exc), evidence=sec.text.splitlines()[:3])
    s = ctx.expect.settings
    usage = {m.mountpoint: round(m.use_pct, 1) for m in mounts}
    full = {k: v for k, v in usage.items() if v >= s.disk_fail_pct}
    high = {k: v for k, v in usage.items() if s.disk_warn_pct <= v < s.disk_fail_pct}
    threshold = {"warn_pct": s.disk_warn_pct, "fail_pct": s.disk_fail_pct}
    if full:
        return result(cid, Status.FAIL, "filesystem(s) full: " + ", ".join(f"{k} {v}%" for k, v in full.items()),
                      observed=usage, threshold=threshold,
                      detail="free space (docker image prune, old checkpoints, logs); "
                      "nothing is deleted automatically")
    if high:
        return result(cid, Status.WARN, "filesystem(s) filling: " + ", ".join(f"{k} {v}%" for k, v in high.items()),
                      observed=usage, threshold=threshold)
    return result(cid, Status.PASS, f"{len(mounts)} filesystem(s) below {s.disk_warn_pct:g}%",
                  observed=usage, threshold=threshold)


# Pool health states (zpool list -o health; zpoolprops(7)).
_ZPOOL_HEALTH = {"ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED", "SUSPENDED"}
_NO_POOLS = "no pools available"  # zpool prints it (exit 0) when nothing is imported


def parse_zpool_list(text: str) -> tuple[dict[str, str], list[str]]:
    """``zpool list -H -o name,health,capacity`` -> ({pool: health}, other lines).

    Columns are split on any whitespace (-H gives tabs; a copy or a missing -H gives spaces);
    a line counts as a pool only when its second column is a pool health state.
    """
    pools: dict[str, str] = {}
    other: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].upper() in _ZPOOL_HEALTH:
            pools[parts[0]] = parts[1].upper()
        elif line.strip():
            other.append(line.strip())
    return pools, other


def _docker_driver(info: Section) -> tuple[str | None, str | None] | CheckResult:
    """Docker's storage driver and root from ``docker info --format '{{json .}}'``."""
    doc = find_json(info.text, ("Driver",)) if info.ok else {}
    if not isinstance(doc, dict):  # null, a list, a string: not docker info's object
        return result("zfs.docker", Status.ERROR, "docker info printed no JSON object: cannot judge",
                      evidence=[ln[:200] for ln in info.text.splitlines()[-2:]])
    driver, root = doc.get("Driver"), doc.get("DockerRootDir")
    return (driver if isinstance(driver, str) else None, root if isinstance(root, str) else None)


def _zpool_verdict(cid: str, sec: Section) -> CheckResult | dict[str, str]:
    """The pools, or FAIL (none imported / not ONLINE) or ERROR (output not understood)."""
    pools, other = parse_zpool_list(sec.text)
    if not pools and (not other or any(_NO_POOLS in ln for ln in other)):
        return result(cid, Status.FAIL, "no zpool imported", remedy=RemedyKind.REIMAGE,
                      detail="the image creates the pool; re-imaging only touches the root disk",
                      evidence=other[:3])
    if not pools:
        return result(cid, Status.ERROR, "zpool list printed no pool line: cannot judge",
                      evidence=[ln[:200] for ln in other[:3]])
    unhealthy = {k: v for k, v in pools.items() if v != "ONLINE"}
    if unhealthy:
        return result(
            cid, Status.FAIL, "zpool(s) not ONLINE: " + ", ".join(f"{k} {v}" for k, v in unhealthy.items()),
            observed={"pools": pools}, threshold={"health": "ONLINE"}, remedy=RemedyKind.REPAIR,
            part=", ".join(f"disk(s) of pool {k} (see zpool status)" for k in unhealthy),
            evidence=[f"{k}\t{v}" for k, v in unhealthy.items()],
        )
    return pools


def _no_zfs(sec: Section | None) -> bool:
    """No pool tool, no output, or zpool saying it has no pool."""
    return sec is None or sec.missing or not sec.text.strip() or (
        not parse_zpool_list(sec.text)[0] and _NO_POOLS in sec.text)


def check_zfs_docker(ctx: Context) -> CheckResult:
    """Every zpool ONLINE, and Docker's data root on ZFS (when the site uses ZFS)."""
    cid = "zfs.docker"
    sec = ctx.section("zpool")
    if not ctx.expect.settings.zfs and _no_zfs(sec):
        return not_applicable(cid, "site does not use ZFS (settings.health.zfs) and no pool exists")
    if sec is None or sec.missing:
        return missing_tool(cid, "zpool (zfsutils)")
    pools = _zpool_verdict(cid, sec)
    if isinstance(pools, CheckResult):
        return pools
    observed: dict[str, object] = {"pools": pools}
    if not ctx.expect.settings.zfs:
        return result(cid, Status.PASS, "zpool(s) ONLINE", observed=observed)
    info = ctx.section("docker_info")
    if info is None or info.missing:
        return missing_tool(cid, "docker")
    found = _docker_driver(info)
    if isinstance(found, CheckResult):
        return found
    driver, root = found
    observed.update({"docker_driver": driver, "docker_root": root})
    if driver != "zfs":
        return result(cid, Status.FAIL, f"Docker storage driver is {driver or 'unknown'}, not zfs",
                      observed=observed, threshold={"docker_driver": "zfs"},
                      remedy=RemedyKind.REIMAGE, evidence=[ln[:200] for ln in info.text.splitlines()[-2:]])
    return result(cid, Status.PASS, "zpool(s) ONLINE, Docker on zfs", observed=observed)


def kernel_offenders(lines: list[str], allow: list[str]) -> list[str]:
    """Error-level kernel lines matching none of the allow-list patterns (Xid/SXid lines and
    PCIe bandwidth notes are judged by their own checks and skipped here)."""
    patterns = [re.compile(p) for p in [*DEFAULT_KERNEL_ALLOW, *allow]]
    judged = {e.line for e in parse_kernel_log(lines)} | {w.line for w in parse_bandwidth_warnings(lines)}
    out = []
    for line in lines:
        text = line.strip()
        if not text or text in judged or line.rstrip("\n") in judged:
            continue
        if text.startswith("-- ") or text.startswith("No entries"):
            continue  # journalctl banners
        if any(p.search(text) for p in patterns):
            continue
        out.append(text)
    return out


# Timestamp prefixes of dmesg -T, dmesg --time-format=iso (with or without --decode), journald
# short-iso ("<ts> <host> kernel:") and raw /dev/kmsg records.
_PREFIX = re.compile(
    r"^(?:\[[^\]]*\]\s*|kern\s*:\s*\w+\s*:\s*\S+\s+|[0-9]{4}-[0-9][0-9]-[0-9][0-9]T\S+\s+(?:\S+ kernel:\s*)?"
    r"|[0-9]+,[0-9]+,[0-9]+,[^;]*;)"
)


def summarize_lines(lines: list[str]) -> list[str]:
    """Identical messages folded into one line with a count, first occurrence first (a driver
    that logs the same error 5000 times should not hide the one other error)."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for line in lines:
        msg = _PREFIX.sub("", line, count=1)
        counts[msg] = counts.get(msg, 0) + 1
        first.setdefault(msg, line)
    return [first[m] if n == 1 else f"{n}x {first[m]}" for m, n in counts.items()]


def check_kernel_log(ctx: Context) -> CheckResult:
    """No error-level kernel message since boot outside the allow-list."""
    cid = "kernel.log"
    sec = ctx.section("kernel_errors")
    if sec is None or not sec.ok:
        return result(cid, Status.ERROR, "could not read error-level kernel messages "
                      "(dmesg needs root or sudo; journalctl needs the systemd-journal group)",
                      evidence=sec.text.splitlines()[-2:] if sec else [])
    allow = ctx.expect.settings.kernel_log_allow
    try:
        offenders = kernel_offenders(sec.text.splitlines(), allow)
    except re.error as exc:
        return result(cid, Status.ERROR, f"settings.health.kernel_log_allow has a bad pattern: {exc}")
    distinct = summarize_lines(offenders)
    observed = {"lines": len(offenders), "distinct": len(distinct)}
    if offenders:
        return result(cid, Status.WARN, f"{len(offenders)} kernel error line(s) ({len(distinct)} "
                      "distinct) outside the allow-list",
                      observed=observed, threshold={"allow": len(DEFAULT_KERNEL_ALLOW) + len(allow)},
                      detail="add known-harmless patterns to settings.health.kernel_log_allow",
                      evidence=distinct)
    return result(cid, Status.PASS, "no unexpected kernel errors since boot", observed=observed)
