"""What a run does with each host, from the step the host last finished: install it, only
configure it (installed already: a run that stopped in site.yml), or leave it alone with the
reason. A host that was configured is never reinstalled without consent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.inventory.model import Host
from provisioner.state import HostRecord, NodeState, Step
from provisioner.workflow.selection import held_in_maintenance


@dataclass(frozen=True)
class Intent:
    """What the command was asked to do (rack, reimage or configure, and their flags)."""

    configure: bool = True  # site.yml after the install (not --skip-configure)
    reimage: bool = False  # `provision reimage`: install the named hosts again
    restart: bool = False  # reimage: even past an interrupted re-image's install
    reinstall: bool = False  # rack: consent to reinstall hosts that were configured
    configure_only: bool = False  # `provision configure`: never install
    force: bool = False  # also hosts in maintenance


@dataclass
class RunPlan:
    """The hosts to install, those to configure only, and those left alone (host -> why)."""

    install: list[Host] = field(default_factory=list)
    configure: list[Host] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    # among ``skipped``: hosts a reinstall would wipe although they were configured; consent
    # (--reinstall, or a yes on the terminal) moves them to ``install``
    consent: dict[str, str] = field(default_factory=dict)
    resumed: dict[str, str] = field(default_factory=dict)  # configure-only hosts: why

    @property
    def names(self) -> list[str]:
        """Every host the run will work on."""
        return [h.name for h in (*self.install, *self.configure)]


def plan_hosts(
    hosts: Sequence[Host],
    records: Mapping[str, HostRecord],
    intent: Intent,
    busy: Mapping[str, str] | None = None,
) -> RunPlan:
    """Sort ``hosts`` by what the run does with each (``busy``: hosts another run holds)."""
    plan = RunPlan()
    for host in hosts:
        rec = records[host.name]
        if busy and host.name in busy:
            plan.skipped[host.name] = f"in use by {busy[host.name]}"
        elif held_in_maintenance(rec, force=intent.force):
            plan.skipped[host.name] = f"in maintenance: {rec.reason or 'no reason given'}"
        else:
            _sort(plan, host, rec, intent)
    return plan


def _installed(rec: HostRecord) -> bool:
    """The host's OS is on disk and site.yml has not been applied to it since."""
    return rec.step is Step.INSTALLED and rec.state in (NodeState.DEPLOYED, NodeState.FAILED)


def _sort(plan: RunPlan, host: Host, rec: HostRecord, intent: Intent) -> None:
    name, state = host.name, rec.state
    if intent.configure_only:
        if _installed(rec):
            plan.configure.append(host)
            plan.resumed[name] = "installed, site.yml not applied yet"
        elif rec.step is Step.CONFIGURED and state in (NodeState.CONFIGURED, NodeState.VALIDATED):
            plan.skipped[name] = f"already {state.value}"
        else:
            plan.skipped[name] = (
                f"not installed ({state.value}): `provision rack {name}` installs it first"
            )
        return
    if intent.reimage:
        interrupted = _installed(rec) and rec.goal is Step.CONFIGURED
        if interrupted and intent.configure and not intent.restart:
            plan.configure.append(host)
            plan.resumed[name] = "its re-image stopped after the install: site.yml only"
        else:
            plan.install.append(host)
        return
    if state is NodeState.DEPLOYING:
        plan.install.append(host)  # an install cut short: it starts over
    elif _installed(rec):
        if intent.configure:
            plan.configure.append(host)
            plan.resumed[name] = "installed, site.yml not applied yet"
        else:
            plan.skipped[name] = "already deployed" if state is NodeState.DEPLOYED else (
                f"installed, not configured ({rec.reason or state.value})")
    elif state in (NodeState.DEPLOYED, NodeState.CONFIGURED, NodeState.VALIDATED):
        plan.skipped[name] = f"already {state.value}"
    elif rec.step is Step.CONFIGURED:
        why = f"was configured, now {state.value} ({rec.reason or 'no reason given'})"
        if intent.reinstall:
            plan.install.append(host)
        else:
            plan.skipped[name] = f"{why}: reinstalling it needs --reinstall"
            plan.consent[name] = why
    else:
        plan.install.append(host)
