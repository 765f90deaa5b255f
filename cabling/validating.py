"""The validate use case: judge a fabric from saved tool outputs, from the tools run now
(``--live``), or sweep after sweep (``--watch``), with error counters when ibqueryerrors ran."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from cabling.discovery.ibqueryerrors import CounterReport, load_ibqueryerrors
from cabling.discovery.model import DiscoveredFabric
from cabling.findings import Finding, Report
from cabling.live import Capture, LiveTarget, capture
from cabling.model import Manifest
from cabling.resolve import ResolvedFabric, resolve, vendor_default_switch
from cabling.sources import DiscoveryOptions

Note = Callable[[str], None]


@dataclass
class Judged:
    """One validation: the report and what it was made from."""

    report: Report
    fab: DiscoveredFabric
    found: ResolvedFabric
    counters: CounterReport | None = None


def judge(manifest: Manifest, options: DiscoveryOptions, counters_file: Path | None, note: Note,
          extra: list[Finding] | None = None) -> Judged:
    """Validate the fabric the options describe; error counters from ``counters_file`` if given."""
    from cabling.diff import validate

    fab, names = options.load(note)
    found = resolve(fab, manifest, names, silent_switch_names(fab, manifest, names))
    findings = list(extra or [])
    counters = None
    if counters_file is not None:
        from cabling.counters import counter_findings

        counters = load_ibqueryerrors(counters_file)
        findings += counter_findings(counters, fab, found, manifest)
    return Judged(validate(manifest, found, findings), fab, found, counters)


def silent_switch_names(fab: DiscoveredFabric, manifest: Manifest, names: dict[str, str]) -> dict[str, str]:
    """Names from their cables for switches still at their vendor description (none: no naming pass)."""
    if not any(vendor_default_switch(n) for n in fab.nodes.values()):
        return {}
    from cabling.naming import name_silent_switches

    return name_silent_switches(fab, manifest, names)


def judge_live(manifest: Manifest, base: DiscoveryOptions, target: LiveTarget, folder: Path, counters: bool,
               note: Note) -> tuple[Judged, Capture]:
    """Run the tools once into ``folder`` and judge what they printed."""
    cap = capture(target, folder, counters=counters)
    note(f"ran {', '.join(c.tool for c in cap.commands)} {target.where()}: raw outputs in {folder}")
    options = replace(base, ibnetdiscover=cap.ibnetdiscover, iblinkinfo=[cap.iblinkinfo])
    judged = judge(manifest, options, cap.ibqueryerrors, note)
    judged.report.title = f"validate {manifest.source} against the fabric as seen {target.where()} now ({folder})"
    return judged, cap


def watch(manifest: Manifest, base: DiscoveryOptions, target: LiveTarget, folder: Path, counters: bool,
          interval: float, count: int | None, note: Note) -> Judged:
    """Sweep every ``interval`` seconds (``count`` times, or until Ctrl-C; SIGUSR1 sweeps now),
    print what changed between sweeps; the last sweep's report with what the watch saw."""
    from cabling.watch import Watch, sweep_of

    seen = Watch()
    wake = threading.Event()
    judged: Judged | None = None
    number = 0
    previous = _on_usr1(wake)
    try:
        while count is None or number < count:
            if number:
                wake.wait(interval)  # the interval between sweeps, or a SIGUSR1 asking for one now
                wake.clear()
            number += 1
            judged, cap = judge_live(manifest, base, target, folder / f"sweep-{number:03d}", counters, note)
            found = seen.add(sweep_of(number, cap.at, judged.found, judged.fab, judged.counters))
            note(f"sweep {number}: {judged.report.errors} error(s), {len(found)} change(s) since the last sweep")
            for change in found:
                note(f"  {change.text}")
    except KeyboardInterrupt:
        note(f"stopped after {number} sweep(s)")
    finally:
        _restore_usr1(previous)
    if judged is None:
        raise KeyboardInterrupt
    extra = _fold_growth(judged.report.findings, seen.findings())
    if extra:
        report = judged.report
        from cabling.rootcause import arrange

        report.findings = arrange(_by_kind(report.findings + extra))
    judged.report.stats["sweeps"] = number
    return judged


def _fold_growth(findings: list[Finding], seen: list[Finding]) -> list[Finding]:
    """What the watch saw, less counter growth at a port the last sweep already names for its
    counters: that finding says how much of it came during the watch instead."""
    named = {e: f for f in findings if f.kind in ("flapping", "link_errors") for e in f.endpoints}
    out = []
    for f in seen:
        grew, port = f.data.get("grew"), f.endpoints[0] if f.endpoints else ""
        if grew and port in named:
            said = ", ".join(f"{k} +{d}" for k, d in sorted(grew.items()))
            named[port].message += f" ({said} during the watch)"
            named[port].data["grew"] = grew
            continue
        out.append(f)
    return out


def _by_kind(findings: list[Finding]) -> list[Finding]:
    from cabling.findings import VALIDATE_KINDS

    order = {k: n for n, k in enumerate(VALIDATE_KINDS)}
    return sorted(findings, key=lambda f: order.get(f.kind, 99))


def _on_usr1(wake: threading.Event) -> object:
    """SIGUSR1 wakes the watch for a sweep now (where signals can be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(_signum: int, _frame: FrameType | None) -> None:
        wake.set()

    return signal.signal(signal.SIGUSR1, handler)


def _restore_usr1(previous: object) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGUSR1, previous)  # type: ignore[arg-type]
