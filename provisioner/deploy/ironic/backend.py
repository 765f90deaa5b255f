"""The Ironic deploy backend: the same `provision rack` on sites whose hosts OpenStack Ironic
installs (a conductor per rack or room, one shared database: docs/ironic.md).

Per host: enrol its node (BMC by reference, the provisioning MAC as the only PXE port, root-disk
hints, no automated cleaning), ``manage`` (Ironic checks the BMC credentials), inspect out of
band and compare with our discovery, ``provide``, then deploy to ``active`` with the image URL
and its sha256 and our cloud-init user-data as a config drive. A re-image is Ironic's
``rebuild`` (root disk only); a release is ``undeploy``. Every waiting host is read from one
node list per poll. Only the named hosts' nodes are touched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    register_backend,
)
from provisioner.deploy.ironic import states
from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.configdrive import config_drive
from provisioner.deploy.ironic.dry_run import IronicPlan, plan
from provisioner.deploy.ironic.errors import (
    IronicError,
    IronicNodeFailed,
    IronicNotFound,
    IronicTimeout,
)
from provisioner.deploy.ironic.inspection import InspectionReport, compare
from provisioner.deploy.ironic.nodes import (
    EnrolResult,
    NodeSpec,
    enrol,
    log,
    node_spec,
    ports_ok,
    set_ports,
)
from provisioner.deploy.ironic.poller import NodePoller
from provisioner.deploy.ironic.settings import host_link_gbps, ironic_settings, open_client
from provisioner.exceptions import DeployError, NotReady, ProvisionerError
from provisioner.settings.ironic import IronicSettings

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

__all__ = ["IronicBackend"]

MAX_STEPS = 12  # state changes one deploy call drives at most (a loop guard)


def _why(node: dict[str, Any]) -> str:
    if node.get("maintenance"):
        return str(node.get("maintenance_reason") or node.get("last_error") or
                   node.get("fault") or "no reason given")
    return str(node.get("last_error") or "Ironic gave no last_error")


@register_backend
class IronicBackend(DeployBackend):
    """Drives OpenStack Ironic through its REST API (one pinned microversion)."""

    name = "ironic"
    # Ironic powers and boots hosts through its own Redfish driver.
    drives_power: ClassVar[bool] = False

    def __init__(
        self,
        site: Site | None = None,
        *,
        client: IronicClient | None = None,
        settings: IronicSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._site = site
        self._client = client
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._poller: NodePoller | None = None
        self._rebuild: set[str] = set()  # hosts released for a re-image: rebuild, not skip
        self.inspections: dict[str, InspectionReport] = {}

    # -- connection ---------------------------------------------------------------------

    def _connect(self, site: Site | None = None
                 ) -> tuple[IronicClient, IronicSettings, Site]:
        with self._lock:
            if site is not None:
                self._site = site
            if self._site is None:
                raise DeployError(
                    "the Ironic backend was used before prepare() was given the site",
                    hint="this is a bug in the caller: call prepare(site, requests) first")
            if self._settings is None:
                self._settings = ironic_settings(self._site)
            if self._client is None:
                self._client = open_client(self._site, self._settings, sleep=self._sleep)
            return self._client, self._settings, self._site

    @property
    def client(self) -> IronicClient:
        """The API client (after prepare, or built from the site given at construction)."""
        return self._connect()[0]

    @property
    def poller(self) -> NodePoller:
        client, settings, _ = self._connect()
        with self._lock:
            if self._poller is None:
                # Slightly under the interval, so that each waiter sees a new read per round.
                self._poller = NodePoller(client, max_age_s=settings.poll_interval_s * 0.9,
                                          clock=self._clock)
            return self._poller

    def host_link_gbps(self, site: Site) -> float:
        """settings.ironic.host_link_gbps (Ironic does not gate image streams: waves use it)."""
        return host_link_gbps(site)

    # -- DeployBackend ------------------------------------------------------------------

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Check Ironic serves our microversion and the site gives what every deploy needs."""
        client, settings, _ = self._connect(site)
        newest = client.max_version()
        if newest < settings.api_version:
            raise NotReady(
                f"Ironic at {settings.url} serves API up to {newest[0]}.{newest[1]}, "
                f"older than settings.ironic.microversion {settings.microversion}",
                hint="upgrade Ironic (2023.1 or newer serves 1.81)")
        if settings.deploy_interface == "direct":
            image = site.settings.image
            if image is None or not image.url or not image.sha256:
                raise NotReady(
                    "the direct deploy needs settings.image.url and settings.image.sha256",
                    hint="set them in the site file (Ironic verifies the image's sha256)")
            if settings.deploy_kernel is None:
                raise NotReady(
                    "the direct deploy needs settings.ironic.deploy_kernel and deploy_ramdisk "
                    "(the ironic-python-agent that writes the image)",
                    hint="point them at an ironic-python-agent kernel and initramfs Ironic can "
                         "fetch (docs/ironic.md)")
        log.info("Ironic at %s (API up to %d.%d), %d host(s)", settings.url, *newest,
                 len(requests))

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        """Enrol/manage/inspect/provide/deploy one host; a failure is an outcome, not a raise."""
        outcome = DeployOutcome(host=request.host.name, ok=False)
        try:
            self._deploy(request, progress, outcome)
        except ProvisionerError as exc:
            outcome.reason = exc.message
            outcome.log += f"\n{exc}"
            log.warning("%s", exc.message)
        return outcome

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Ready the host for a re-image: its next deploy is Ironic's ``rebuild`` (the root
        disk is written again, other disks untouched). Never erases: refused with ``erase``."""
        if erase:
            raise DeployError(
                f"{request.host.name}: the Ironic backend never erases disks",
                hint="Ironic's erase cleaning wipes every disk, data disks and ZFS pools "
                "included; run `baremetal node clean` yourself if that is really wanted")
        client, _, site = self._connect()
        spec = self._spec(site, request)
        from provisioner.deploy.ironic.nodes import find_node

        node = find_node(client, site, spec)
        if node is None or node.get("provision_state") != states.ACTIVE:
            return  # nothing deployed: the next deploy installs it afresh
        with self._lock:
            self._rebuild.add(request.host.name)

    def undeploy(self, request: DeployRequest, progress: ProgressFn | None = None) -> str:
        """Tear the host's deployment down (``deleted``) and wait for ``available``."""
        client, settings, site = self._connect()
        spec = self._spec(site, request)
        from provisioner.deploy.ironic.nodes import find_node

        node = find_node(client, site, spec)
        if node is None:
            return "not in Ironic"
        state = node.get("provision_state")
        if state in (states.AVAILABLE, states.MANAGEABLE, states.ENROLL):
            return f"already {state}"
        if state not in (states.ACTIVE, states.DEPLOY_FAILED, states.ERROR, states.DEPLOY_WAIT):
            raise IronicError(f"{spec.name}: Ironic node {node['uuid']} is {state!r}: cannot "
                              "undeploy it now", node=node["uuid"],
                              hint="wait for Ironic to finish its current operation")
        client.set_provision_state(node["uuid"], "deleted")
        self._wait(node, spec.name, phase="release", want={states.AVAILABLE},
                   timeout_s=settings.undeploy_timeout_s, progress=progress)
        return "undeployed"

    def close(self) -> None:
        """Nothing runs locally for Ironic: forget the secrets the client sent (the poller
        keeps its counts for the caller)."""
        if self._client is not None:
            self._client.close()

    def plan(self, site: Site, requests: Sequence[DeployRequest], *, reimage: bool = False
             ) -> IronicPlan:
        """What ``deploy`` (or a re-image) would change for each host; changes nothing."""
        client, settings, _ = self._connect(site)
        return plan(client, site, settings, [(self._spec(site, r), r) for r in requests],
                    reimage=reimage)

    # -- enrolment ----------------------------------------------------------------------

    def _spec(self, site: Site, request: DeployRequest) -> NodeSpec:
        _, settings, _ = self._connect()
        mac = request.mac or request.host.provisioning_mac or ""
        return node_spec(site, request.host, mac, settings, request.system_path)

    def enrol(self, request: DeployRequest, *, manage: bool = True,
              send_password: bool = False, progress: ProgressFn | None = None
              ) -> EnrolResult:
        """Create or update the host's node (idempotent); with ``manage`` take it to
        ``manageable`` (Ironic checks the BMC credentials on the way)."""
        client, settings, site = self._connect()
        spec = self._spec(site, request)
        if not spec.mac:
            raise DeployError(f"{spec.name}: no provisioning MAC to enrol",
                              hint="run `provision discover` first, or pin provisioning_mac")
        result = enrol(client, site, spec, send_password=send_password)
        if manage and result.node.get("provision_state") == states.ENROLL:
            client.set_provision_state(result.uuid, "manage")
            node = self._wait(result.node, spec.name, phase="manage", want={states.MANAGEABLE},
                              timeout_s=settings.manage_timeout_s, progress=progress)
            result.node = node
            result.changed.append("managed")
            result.changed += set_ports(client, result.uuid, spec.mac, spec.name)
        return result

    # -- the deploy walk ----------------------------------------------------------------

    def _deploy(self, request: DeployRequest, progress: ProgressFn, outcome: DeployOutcome
                ) -> None:
        client, settings, site = self._connect()
        name = request.host.name
        phases = outcome.phases
        start = self._clock()
        spec = self._spec(site, request)
        result = enrol(client, site, spec)
        uuid = result.uuid
        progress(name, "enrol", f"Ironic node {uuid}: {result.action}")
        phases["enrol"] = self._clock() - start
        outcome.log += f"Ironic node {uuid}\n"
        node = client.node(uuid)
        for _ in range(MAX_STEPS):
            state = node.get("provision_state")
            if node.get("maintenance"):
                raise IronicNodeFailed(
                    f"{name}: Ironic node {uuid} is in maintenance: {_why(node)}", node=uuid,
                    hint="fix the cause, then `baremetal node maintenance unset` and run again")
            if state in states.HANDS_OFF:
                raise IronicNodeFailed(
                    f"{name}: Ironic node {uuid} is {state!r}: not touching it", node=uuid,
                    hint="a person holds or uses the node in Ironic; release it there first")
            if state in states.BUSY:
                node = self._settle(node, name, progress)
                continue
            start = self._clock()
            if state == states.ENROLL:
                node = self._manage(node, spec, progress, from_state=state)
                phases["manage"] = phases.get("manage", 0.0) + self._clock() - start
            elif state in (states.INSPECT_FAILED, states.CLEAN_FAILED, states.ADOPT_FAILED):
                progress(name, "manage", f"Ironic: {state}: {_why(node)}; back to manageable")
                node = self._manage(node, spec, progress, from_state=state)
            elif state == states.MANAGEABLE:
                node = self._inspect_and_provide(request, spec, node, progress, phases)
            elif state == states.AVAILABLE:
                if not ports_ok(client, uuid, spec.mac):
                    progress(name, "manage", "ports need fixing: back to manageable")
                    node = self._manage(node, spec, progress, from_state=state)
                    continue
                node = self._deploy_node(request, node, progress, target="active")
                phases["deploy"] = self._clock() - start
                outcome.ok = True
                return
            elif state == states.DEPLOY_FAILED:
                progress(name, "deploy", f"Ironic: deploy failed earlier ({_why(node)}); "
                         "deploying again")
                node = self._deploy_node(request, node, progress, target="active")
                phases["deploy"] = self._clock() - start
                outcome.ok = True
                return
            elif state == states.ACTIVE:
                with self._lock:
                    rebuild = name in self._rebuild
                if not rebuild:
                    progress(name, "deploy", f"Ironic node {uuid} is already active")
                    outcome.ok = True
                    outcome.reason = "already active in Ironic"
                    return
                node = self._deploy_node(request, node, progress, target="rebuild")
                with self._lock:
                    self._rebuild.discard(name)
                phases["deploy"] = self._clock() - start
                outcome.ok = True
                return
            elif state == states.ERROR:
                progress(name, "release", f"Ironic: undeploy failed earlier ({_why(node)}); "
                         "undeploying again")
                client.set_provision_state(uuid, "deleted")
                node = self._wait(node, name, phase="release", want={states.AVAILABLE},
                                  timeout_s=settings.undeploy_timeout_s, progress=progress)
            else:
                raise IronicNodeFailed(
                    f"{name}: Ironic node {uuid} is in state {state!r}, which this backend "
                    "does not drive", node=uuid, hint="bring it to manageable or available "
                    "in Ironic, then run again")
        raise IronicError(f"{name}: Ironic node {uuid} did not settle after {MAX_STEPS} "
                          "state changes", node=uuid, hint="look at the node's history in "
                          "Ironic (`baremetal node history list`)")

    def _manage(self, node: dict[str, Any], spec: NodeSpec, progress: ProgressFn, *,
                from_state: str) -> dict[str, Any]:
        client, settings, _ = self._connect()
        uuid = str(node["uuid"])
        client.set_provision_state(uuid, "manage")
        progress(spec.name, "manage", "Ironic checks the BMC (manage)" if
                 from_state == states.ENROLL else f"manage (from {from_state})")
        node = self._wait(node, spec.name, phase="manage", want={states.MANAGEABLE},
                          timeout_s=settings.manage_timeout_s, progress=progress)
        set_ports(client, uuid, spec.mac, spec.name)
        return node

    def _inspect_and_provide(self, request: DeployRequest, spec: NodeSpec,
                             node: dict[str, Any], progress: ProgressFn,
                             phases: dict[str, float]) -> dict[str, Any]:
        client, settings, _ = self._connect()
        uuid, name = str(node["uuid"]), spec.name
        if settings.inspect and not node.get("inspection_finished_at"):
            start = self._clock()
            client.set_provision_state(uuid, "inspect")
            progress(name, "inspect", "Ironic inspects the host out of band")
            node = self._wait(node, name, phase="inspect", want={states.MANAGEABLE},
                              timeout_s=settings.inspect_timeout_s, progress=progress)
            try:
                stored = client.inventory(uuid)
            except IronicNotFound:
                stored = {}  # an inspect interface that keeps no inventory (fake, no-inspect)
            report = compare(request.host, spec.mac, stored)
            with self._lock:
                self.inspections[name] = report
            progress(name, "inspect", report.summary())
            # inspection adds a port per NIC, none PXE-enabled: ours is the only one that is
            set_ports(client, uuid, spec.mac, name)
            phases["inspect"] = self._clock() - start
            if report.blocking:
                raise IronicNodeFailed(
                    f"{name}: Ironic's inspection differs from our discovery: "
                    f"{'; '.join(report.blocking)}", node=uuid,
                    hint="fix the site file (provisioning NIC rule, root_disk) or the "
                    "hardware, then run again")
        start = self._clock()
        client.set_provision_state(uuid, "provide")
        progress(name, "provide", "provide (automated cleaning off: no disk is erased)")
        node = self._wait(node, name, phase="provide", want={states.AVAILABLE},
                          timeout_s=settings.provide_timeout_s, progress=progress)
        phases["provide"] = self._clock() - start
        return node

    def _instance_info(self, request: DeployRequest) -> dict[str, Any]:
        _, settings, site = self._connect()
        info: dict[str, Any] = {}
        image = site.settings.image
        if settings.deploy_interface == "ramdisk":
            assert settings.ramdisk is not None  # the model checked
            info["kernel"] = settings.ramdisk.kernel_url
            info["ramdisk"] = settings.ramdisk.ramdisk_url
            if settings.ramdisk.kernel_append_params:
                info["kernel_append_params"] = settings.ramdisk.kernel_append_params
            # Ironic 39's rebuild fails (UnboundLocalError in do_node_deploy) on a node
            # without image_source: the ramdisk is that source here.
            info["image_source"] = settings.ramdisk.ramdisk_url
        elif image is not None and image.url:
            info["image_source"] = image.url
            if image.sha256:
                info["image_os_hash_algo"] = "sha256"
                info["image_os_hash_value"] = image.sha256
            info["image_disk_format"] = image.format
        return info

    def _deploy_node(self, request: DeployRequest, node: dict[str, Any],
                     progress: ProgressFn, *, target: str) -> dict[str, Any]:
        client, settings, site = self._connect()
        uuid, name = str(node["uuid"]), request.host.name
        info = self._instance_info(request)
        if info:
            client.patch_node(uuid, [{"op": "add", "path": f"/instance_info/{k}", "value": v}
                                     for k, v in info.items()])
        drive = (config_drive(site, request.host, request.mac, request.user_data)
                 if settings.config_drive else None)
        client.set_provision_state(uuid, target, configdrive=drive)
        what = "rebuild (root disk only)" if target == "rebuild" else "deploy"
        source = info.get("image_source", "the deploy interface's own")
        progress(name, "deploy", f"Ironic {what} of {source}")
        timeout = settings.deploy_timeout_s or request.timeout_s
        return self._wait(node, name, phase="deploy", want={states.ACTIVE},
                          timeout_s=timeout, progress=progress)

    # -- waiting ------------------------------------------------------------------------

    def _settle(self, node: dict[str, Any], host: str, progress: ProgressFn
                ) -> dict[str, Any]:
        """Wait for an operation someone else started (an earlier run, a person) to end."""
        _, settings, _ = self._connect()
        progress(host, "wait", f"Ironic is busy with the node ({node.get('provision_state')})")
        settled = set(states.FAILED) | {states.ENROLL, states.MANAGEABLE, states.AVAILABLE,
                                        states.ACTIVE}
        return self._wait(node, host, phase="wait", want=settled,
                          timeout_s=settings.deploy_timeout_s or 3600.0, progress=progress)

    def _wait(self, node: dict[str, Any], host: str, *, phase: str, want: set[str],
              timeout_s: float, progress: ProgressFn | None) -> dict[str, Any]:
        """Poll (one list call for every waiting host) until the node reaches ``want``."""
        _, settings, _ = self._connect()
        uuid = str(node["uuid"])
        group = node.get("conductor_group") or None
        poller = self.poller
        deadline = self._clock() + timeout_s
        shown = None
        since: float | None = self._clock()  # the first read follows an action: newer only
        # Ironic takes a moment to act; meanwhile another waiter's poll reads the node too
        # (it is watched from now on), so the first look costs no request of its own.
        poller.watch(uuid, group=group)
        try:
            self._sleep(settings.poll_interval_s)
            while True:
                current = poller.read(uuid, group=group, since=since)
                since = None
                state = current.get("provision_state")
                target = current.get("target_provision_state")
                text = f"Ironic: {state}" + (f" -> {target}" if target else "")
                if progress is not None and text != shown:
                    progress(host, phase, text)
                shown = text
                if current.get("maintenance"):
                    raise IronicNodeFailed(
                        f"{host}: Ironic put node {uuid} in maintenance during {phase}: "
                        f"{_why(current)}", node=uuid, ironic_message=_why(current),
                        hint="fix the cause (BMC reachable? credentials?), then "
                        "`baremetal node maintenance unset` and run again")
                if state in want and not target:
                    return {**node, **current}
                # a failure state keeps its target (deploy failed -> active): it still failed
                if state in states.FAILED or (state not in states.BUSY and not target):
                    raise IronicNodeFailed(
                        f"{host}: Ironic node {uuid} went to {state!r} during {phase}: "
                        f"{_why(current)}", node=uuid, ironic_message=_why(current),
                        hint="read the node's last_error and history in Ironic "
                        "(`baremetal node history list`)")
                if self._clock() >= deadline:
                    raise IronicTimeout(
                        f"{host}: Ironic node {uuid} still {state!r} after {timeout_s:.0f}s "
                        f"of {phase}", node=uuid,
                        hint=f"raise settings.ironic.{phase}_timeout_s, or look at the "
                        "host's console")
                self._sleep(settings.poll_interval_s)
        finally:
            poller.forget(uuid)
