"""`provision health` at fleet scale: one SSH session per host does everything, all at once.

Each host's session reads its error counters, waits the counter interval, reads them again,
prints the big sections when the client says it can take them ("GO" on the session's stdin:
until then they stay on the host, not in a buffer of its ssh client), then waits for the client
to send its node_exporter textfile and installs it (``collector_script(..., textfile_dir=...)``).
Sessions run concurrently on one event loop (up to ``settings.health.parallel``), so every
host's counter wait overlaps with every other's. Parsing and checking a host's ~1 MB of output happens in a process pool sized
to the cores, off the event loop; judging against the host's history and recording it in the
state store happens in one writer thread, as each host finishes. Memory is bounded: a host's
big output is asked for and read only while it holds one of a few buffer slots (the others
wait, their data still on their hosts), and dropped as soon as its results are back.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from provisioner.health.checks import Context, run_checks
from provisioner.health.checks.base import result
from provisioner.health.collector import COLLECT, READY, collector_script, parse_sections
from provisioner.health.config import Expectations
from provisioner.health.model import CheckResult, HostReport, Status
from provisioner.health.runner import HostPlan, unreachable_result
from provisioner.health.ssh_client import SSH_UNREACHABLE, SshClient
from provisioner.health.textfile import render_textfile

READ_CHUNK = 1 << 16
MAX_OUTPUT = 64 << 20  # one host's sections: more is not a collector's answer
MAX_BEFORE_COLLECT = 4 << 20  # meta and two counter reads (every host holds this at once)
MAX_STDERR = 64 << 10
FDS_PER_SESSION = 4  # stdin, stdout, stderr pipes and the pidfd the child watcher holds


@dataclass(frozen=True)
class FleetOptions:
    """How a fleet run goes: sessions open at once, parse workers, textfile directory."""

    sessions: int = 512
    workers: int | None = None  # process pool size; default: the machine's cores
    textfile_dir: str | None = None  # None: no textfile written in the session
    deep: bool = False


def check_output(host: str, output: str, expect: Expectations, deep: bool) -> list[CheckResult]:
    """Parse one host's collector output and run every check on it (in a pool worker)."""
    ctx = Context(host=host, sections=parse_sections(output), expect=expect, deep=deep)
    return run_checks(ctx)


Finish = Callable[[HostReport], HostReport]  # judge against history + record (writer thread)


@dataclass
class _Shared:
    """What every session of one run shares."""

    client: SshClient
    options: FleetOptions
    run_id: str
    pool: Executor
    writer: Executor
    finish: Finish
    on_done: Callable[[HostReport], None] | None
    sessions: asyncio.Semaphore
    slots: asyncio.Semaphore  # hosts whose big output may be in memory at once


class _TooLarge(Exception):
    """A host printed more than it may (the limit, in bytes, is the argument)."""


async def _read_to(reader: asyncio.StreamReader, marker: bytes, data: bytearray,
                   cap: int = MAX_OUTPUT) -> bool:
    """Read into ``data`` until a line equal to ``marker`` is in it (True), or EOF (False);
    _TooLarge past ``cap`` bytes."""
    line = b"\n" + marker + b"\n"
    checked = 0
    while True:
        if data.startswith(line[1:]) or data.find(line, max(0, checked - len(line))) >= 0:
            return True
        checked = len(data)
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            return False
        data += chunk
        if len(data) > cap:
            raise _TooLarge(cap)


async def _drain(reader: asyncio.StreamReader, cap: int) -> bytes:
    """Everything left on a stream, keeping at most ``cap`` bytes (the rest is read and dropped)."""
    kept = bytearray()
    while chunk := await reader.read(READ_CHUNK):
        if len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    return bytes(kept)


def _report(plan: HostPlan, run_id: str, started: datetime, t0: float,
            results: list[CheckResult]) -> HostReport:
    return HostReport(host=plan.target.name, run_id=run_id,
                      started_at=started.isoformat(timespec="seconds"),
                      duration_s=round(time.monotonic() - t0, 3), results=results)


async def _collect(proc: asyncio.subprocess.Process, plan: HostPlan, shared: _Shared
                   ) -> tuple[list[CheckResult] | None, bool]:
    """Read the session up to READY (or its end) and check it: (results, READY reached).
    None: ssh itself failed (exit 255 with nothing printed), the caller names why."""
    assert proc.stdout is not None
    data = bytearray()
    marker = READY.encode() if shared.options.textfile_dir else None
    # The counters and the wait between them: small, read from every host at once.
    await _read_to(proc.stdout, COLLECT.encode(), data, MAX_BEFORE_COLLECT)
    async with shared.slots:  # only now is the big output read, a few hosts at a time
        await _go(proc, close=not shared.options.textfile_dir)
        ready = await _read_to(proc.stdout, marker, data) if marker else False
        if not ready:
            data += await _drain(proc.stdout, MAX_OUTPUT)
            if await proc.wait() == SSH_UNREACHABLE and not data.strip():
                return None, False
        output = data.decode(errors="replace")
        data.clear()  # the worker has its copy; this host's buffer is free for the next
        loop = asyncio.get_running_loop()
        checks = await loop.run_in_executor(shared.pool, check_output, plan.target.name, output,
                                             plan.expect, shared.options.deep)
    t = plan.target
    return [result("host.reachable", Status.PASS, f"ssh {t.user}@{t.address}"), *checks], ready


async def _go(proc: asyncio.subprocess.Process, close: bool) -> None:
    """Tell the host's collector to print its big sections (it waits after COLLECT)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the read finds its end
        proc.stdin.write(b"GO\n")
        await proc.stdin.drain()
        if close:
            proc.stdin.close()


async def _send_textfile(proc: asyncio.subprocess.Process, report: HostReport) -> str | None:
    """Hand the judged host its textfile on the open session; None, or what went wrong."""
    assert proc.stdin is not None and proc.stdout is not None
    body = render_textfile(report, time.time()).encode()
    try:
        proc.stdin.write(b"TEXTFILE %d\n" % len(body) + body)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        return "the session closed before the textfile was sent"
    rest = parse_sections((await _drain(proc.stdout, 1 << 16)).decode(errors="replace"))
    sec = rest.get("textfile")
    if sec is None:
        return "the host did not confirm the textfile"
    return None if sec.ok else (sec.text.strip()[-200:] or f"exit {sec.rc}")


async def _start(plan: HostPlan, shared: _Shared) -> asyncio.subprocess.Process:
    """ssh to the host with the collector script on its stdin (kept open for the textfile)."""
    script = collector_script(plan.expect, deep=shared.options.deep,
                              textfile_dir=shared.options.textfile_dir, wait_for_go=True)
    proc = await asyncio.create_subprocess_exec(
        *shared.client.argv(plan.target, "bash -s"), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(script.encode())
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await proc.stdin.drain()  # stdin stays open: "GO" (and the textfile) follow
    return proc


async def _host(plan: HostPlan, shared: _Shared) -> tuple[HostReport, str | None]:
    """One host's whole session: collect, check, judge and record, publish its textfile."""
    async with shared.sessions:
        started, t0 = datetime.now(UTC), time.monotonic()
        proc = await _start(plan, shared)
        assert proc.stderr is not None
        stderr = asyncio.ensure_future(_drain(proc.stderr, MAX_STDERR))
        results: list[CheckResult] | None = None
        report: HostReport | None = None
        problem: str | None = None
        timed_out = False
        try:
            async with asyncio.timeout(shared.client.command_timeout_s):
                results, ready = await _collect(proc, plan, shared)
                if results is not None:
                    report = await _finish(shared, plan, started, t0, results)
                    if ready:
                        problem = await _send_textfile(proc, report)
                    elif shared.options.textfile_dir:
                        problem = "the session ended before the textfile could be sent"
                await proc.wait()
        except TimeoutError:
            timed_out = True
        except _TooLarge as exc:
            results = [result("host.reachable", Status.ERROR, f"the host printed more than "
                              f"{exc.args[0] >> 20} MiB: not a collector's answer")]
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        err = (await stderr).decode(errors="replace")
        if report is None:
            if results is None:
                why = f"timed out after {shared.client.command_timeout_s:g}s" if timed_out else err
                results = [unreachable_result(plan, why, timed_out)]
            report = await _finish(shared, plan, started, t0, results)
            return report, "unreachable"
        if timed_out:
            problem = f"timed out after {shared.client.command_timeout_s:g}s writing the textfile"
        return report, problem


async def _finish(shared: _Shared, plan: HostPlan, started: datetime, t0: float,
                  results: list[CheckResult]) -> HostReport:
    """Judge and record one host in the writer thread (SQLite commits stay off the loop)."""
    loop = asyncio.get_running_loop()
    raw = _report(plan, shared.run_id, started, t0, results)
    report = await loop.run_in_executor(shared.writer, shared.finish, raw)
    if shared.on_done is not None:
        shared.on_done(report)
    return report


@contextlib.contextmanager
def _pidfd_watcher() -> Iterator[None]:
    """Python 3.11 waits for each child in a thread of its own (512 sessions: 512 threads);
    a pidfd watcher waits for all of them on the event loop. 3.12+ does that by itself."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        yield
        return
    policy = asyncio.get_event_loop_policy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            before = policy.get_child_watcher()
            policy.set_child_watcher(asyncio.PidfdChildWatcher())
    except (AttributeError, OSError):
        yield
        return
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            policy.set_child_watcher(before)


def _raise_fd_limit(sessions: int) -> int:
    """Sessions the open-file limit allows, after raising the soft limit towards the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = sessions * FDS_PER_SESSION + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return sessions
    return max(1, min(sessions, (soft - 256) // FDS_PER_SESSION))


@contextlib.contextmanager
def parse_pool(hosts: int, workers: int | None = None) -> Iterator[Executor]:
    """A process pool sized to the cores for many hosts; a thread for one or two (no worker
    start-up to pay), either way off the event loop."""
    cores = workers or os.cpu_count() or 1
    if hosts <= 2 or cores <= 1:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="health-parse") as pool:
            yield pool
        return
    # forkserver: workers start from a clean single-threaded process that has already
    # imported the checks, not from this one (its event loop and threads).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["provisioner.health.fleet"])
    with ProcessPoolExecutor(max_workers=min(cores, hosts), mp_context=ctx) as pool:
        yield pool


async def _run(plans: list[HostPlan], shared: _Shared) -> list[tuple[HostReport, str | None]]:
    return list(await asyncio.gather(*(_host(p, shared) for p in plans)))


def run_fleet(
    client: SshClient, plans: list[HostPlan], run_id: str, finish: Finish, *,
    options: FleetOptions,
    on_done: Callable[[HostReport], None] | None = None,
) -> tuple[list[HostReport], dict[str, str]]:
    """Check every host in one session each, judging and recording each as it finishes.

    Returns the judged reports in the order of ``plans`` and {host: textfile problem}."""
    if not plans:
        return [], {}
    sessions = _raise_fd_limit(min(options.sessions, len(plans)))
    with parse_pool(len(plans), options.workers) as pool, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="health-store") as writer:
        cores = options.workers or os.cpu_count() or 1

        async def main() -> list[tuple[HostReport, str | None]]:
            shared = _Shared(client, options, run_id, pool, writer, finish, on_done,
                             asyncio.Semaphore(sessions), asyncio.Semaphore(2 * cores + 2))
            return await _run(plans, shared)

        with _pidfd_watcher():
            done = asyncio.run(main())
    problems = {rep.host: why for rep, why in done if why and why != "unreachable"}
    return [rep for rep, _ in done], problems
