"""Every parser and loader the project has for outside input, with the real samples that seed it.

A target takes the bytes of one (mutated) input, writes them where the loader reads them, and calls
it. The property: the call returns, or raises the target's typed error; anything else is a bug.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
CORPUS = FIX / "corpus"

Run = Callable[[bytes, Path], Any]


@dataclass(frozen=True)
class Target:
    """One parser/loader: its seeds, how to call it, the typed errors it may raise."""

    name: str
    seeds: tuple[Path, ...]
    run: Run
    errors: tuple[type[BaseException], ...]
    # The file name every typed error must name (None: the parser gets text, not a file).
    names_file: str | None = None
    # Turns a recording into this target's format (e.g. a YAML manifest into JSON).
    convert: Callable[[bytes], bytes] | None = None
    # Instead of ``run``: also told which seed was mutated (the resource of a served tree).
    run_seed: Callable[[bytes, Path, int], Any] | None = None

    def seed_bytes(self) -> list[bytes]:
        raw = [p.read_bytes() for p in self.seeds]
        return [self.convert(b) for b in raw] if self.convert else raw


def _files(folder: Path, pattern: str = "*") -> tuple[Path, ...]:
    found = tuple(sorted(p for p in folder.glob(pattern) if p.is_file() and p.name != "PROVENANCE.md"))
    assert found, f"no seed files {pattern} in {folder}"
    return found


def _write(work: Path, name: str, data: bytes) -> Path:
    path = work / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _text(data: bytes) -> str:
    # Remote command output reaches the health parsers decoded this way (health/ssh.py).
    return data.decode("utf-8", errors="replace")


# --- inventory ---------------------------------------------------------------------------------


def _site(data: bytes, work: Path) -> Any:
    from provisioner.inventory import load_site

    return load_site(_write(work, "site/site.yml", data))


_SITE_FOR_SECRETS = """\
site: fuzz
networks:
  bmc: {{cidr: 10.0.0.0/24}}
credentials:
  bmc: {{username: root, password: {ref}}}
profiles:
  p: {{gpus: 8, provisioning_nic: {{port_id: NIC.1}}}}
racks:
  - name: r1
    index: 1
    hosts:
      - {{name: h1, u: 1, profile: p, bmc: {{credentials: bmc}}}}
"""


def _secret_file(data: bytes, work: Path) -> Any:
    from provisioner.inventory import load_site
    from provisioner.inventory.credentials import resolve_credentials

    secret = _write(work, "secret/bmc.password", data)
    site = _write(work, "site/site.yml", _SITE_FOR_SECRETS.format(ref=f"{{file: {secret}}}").encode())
    return resolve_credentials(load_site(site), "bmc")


def _vault(plain: bytes, work: Path) -> Any:
    import os

    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    from provisioner.inventory import load_site
    from provisioner.inventory.credentials import resolve_credentials

    pw = _write(work, "vault.pass", b"fuzz-vault-password\n")
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"fuzz-vault-password"))])
    _write(work, "site/vault.yml", vault.encrypt(plain))
    site = _write(work, "site/site.yml",
                  _SITE_FOR_SECRETS.format(ref="{vault: vault.yml, key: bmc_password}").encode())
    old = os.environ.get("PROVISIONER_VAULT_PASSWORD_FILE")
    os.environ["PROVISIONER_VAULT_PASSWORD_FILE"] = str(pw)
    try:
        return resolve_credentials(load_site(site), "bmc")
    finally:
        if old is None:
            os.environ.pop("PROVISIONER_VAULT_PASSWORD_FILE", None)
        else:
            os.environ["PROVISIONER_VAULT_PASSWORD_FILE"] = old


# --- cabling -----------------------------------------------------------------------------------


def _manifest(suffix: str) -> Run:
    def run(data: bytes, work: Path) -> Any:
        from cabling.sources import open_manifest

        return open_manifest([_write(work, f"manifest{suffix}", data)])

    return run


def _cli(args: Callable[[Path], list[str]], name: str, codes: set[int]) -> Run:
    """Through the ``provision`` CLI: the documented exit code and a one-line error, never a
    traceback (exit 1) or a mangled message."""

    def run(data: bytes, work: Path) -> Any:
        from typer.testing import CliRunner

        from provisioner.cli.main import app

        path = _write(work, name, data)
        res = CliRunner().invoke(app, args(path))
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        if res.exit_code not in codes:
            raise AssertionError(f"exit {res.exit_code}: {res.output[-500:]}")
        if res.exit_code == 2 and not (res.output.startswith("error: ") and path.name in res.output):
            raise AssertionError(f"error message does not name {path.name}: {res.output[-500:]}")
        return res

    return run


def _yaml_to_json(data: bytes) -> bytes:
    import yaml

    return json.dumps(yaml.safe_load(data), indent=1).encode()


def _yaml_to_csv(data: bytes) -> bytes:
    from cabling.csvio import export_csv
    from cabling.manifest import parse_manifest

    return export_csv(parse_manifest(data.decode())).encode()


def _ndt(data: bytes, work: Path) -> Any:
    from cabling.ndt import load_ndt

    return load_ndt([_write(work, "fabric.ndt", data)])


def _loader(module: str, func: str, name: str) -> Run:
    def run(data: bytes, work: Path) -> Any:
        import importlib

        return getattr(importlib.import_module(module), func)(_write(work, name, data))

    return run


def _guid_list(data: bytes, work: Path) -> Any:
    from cabling.discovery.nodemap import parse_guid_list

    return parse_guid_list(_text(data), "guids.txt")


def _ufm(which: str) -> Run:
    def run(data: bytes, work: Path) -> Any:
        from cabling.discovery.ufm import RESOURCES, load_ufm_dir

        d = work / "ufm"
        for name in RESOURCES:
            body = data if name == which else (FIX / "cabling" / "ufm" / f"{name}.json").read_bytes()
            _write(d, f"{name}.json", body)
        return load_ufm_dir(d)

    return run


def _ibstat_dir(data: bytes, work: Path) -> Any:
    from cabling.discovery.iblinkinfo import load_iblinkinfo
    from cabling.sources import ibstat_names

    fab = load_iblinkinfo(FIX / "cabling" / "small-fabric.iblinkinfo")
    _write(work, "ibstat/gpu001.txt", data)
    return ibstat_names(work / "ibstat", fab)


# --- health collectors -------------------------------------------------------------------------


def _health(func: str, module: str, lines: bool = False) -> Run:
    def run(data: bytes, work: Path) -> Any:
        import importlib

        parse = getattr(importlib.import_module(f"provisioner.health.{module}"), func)
        text = _text(data)
        return parse(text.splitlines() if lines else text)

    return run


_HEALTH_SECTIONS = {  # collector section -> a recording of that tool's output
    "nvsmi": "nvidia-smi-q.h100x2.one-bad.txt", "nvsmi_loaded": "nvidia-smi-q.h100x2.good.txt",
    "lspci": "lspci-vvv-nn-D.narrow-link-acs-on.txt", "lspci_loaded": "lspci-vvv-nn-D.gpu-missing.txt",
    "kernel_log": "dmesg-T.xid79.log", "kernel_errors": "kmsg.xid154.log", "df": "df-P-B1.one-full.txt",
    "zpool": "zpool-list.degraded.txt", "docker_info": "docker-info.zfs.json",
    "ibstat": "ibstat.ndr-one-port-200g.txt", "ib_counters_0": "ib-counters.0.txt",
    "ib_counters_1": "ib-counters.1.txt", "nvlink_status": "nvlink-status.h100x2.one-inactive.txt",
    "nvlink_errors_0": "nvlink-errors.0.txt", "nvlink_errors_1": "nvlink-errors.1.txt",
    "transceivers": "mlxlink-m.two-ports.txt", "dcgm": "dcgm-exporter.metrics.txt",
    "dcgm_diag": "dcgmi-diag-r2.one-fail.json", "gpu_matmul": "gpu-matmul.one-slow.txt",
    "nvbandwidth": "nvbandwidth.d2d-read-ce.one-slow-pair.txt",
}


def _collector_output(data: bytes) -> bytes:
    """One host's whole collector output, as the health script prints it, from the recordings."""
    from provisioner.health.collector import BEGIN, END

    del data
    out = []
    for name, fixture in _HEALTH_SECTIONS.items():
        text = (FIX / "health" / fixture).read_text()
        out.append(f"{BEGIN} {name}\n{text}\n{END} {name} rc=0\n")
    return "".join(out).encode()


def _health_checks(data: bytes, work: Path) -> Any:
    """Every check over one mutated collector output: none may crash (a crash hides a fault)."""
    from provisioner.health.checks import run_checks
    from provisioner.health.checks.base import Context
    from provisioner.health.collector import parse_sections
    from provisioner.health.config import Expectations, HealthSettings

    expect = Expectations(gpus=2, gpu_model="H100", nvswitch=True, ib_ports=2, ib_rate_gbps=400,
                          settings=HealthSettings(dcgm_exporter=True))
    results = run_checks(Context("h1", parse_sections(_text(data)), expect, deep=True))
    crashed = [f"{r.id}: {r.summary}" for r in results if r.summary.startswith("check crashed")]
    if crashed:
        raise AssertionError("; ".join(crashed))
    return results


# --- Redfish and MAAS JSON ---------------------------------------------------------------------


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None  # the transport rejects non-JSON before any parser sees it


def _redfish(data: bytes, work: Path) -> Any:
    """Every pure Redfish parser over one resource (each takes the JSON object of a resource)."""
    from provisioner.bmc import redfish_parse as rp

    doc = _json_or_none(data)
    if not isinstance(doc, dict):
        return None
    out: list[Any] = [
        rp.parse_ethernet_interface(doc), rp.parse_drive(doc), rp.parse_simple_storage(doc),
        rp.parse_firmware(doc), rp.allowable_values(doc, "ResetType"),
        rp.reset_types_from_action_info(doc), rp.is_host_interface(doc), rp.function_port_link(doc),
        rp.parse_datetime(doc.get("DateTime")), rp.norm_mac(doc.get("MACAddress")),
        rp.link_list(doc.get("Members")), rp.is_infiniband(doc, doc, str(doc.get("Id"))),
    ]
    for port in (doc, None):
        out.append(rp.parse_device_function(doc, port, str(doc.get("Id"))))
    return out


_BMC_MOCKUPS = ("dmtf-public-rackmount1", "dell-idrac9-poweredge-r750-ib-libredfish",
                "supermicro-sys-821ge-tnhr-hgx-h100-libredfish",
                "hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish", "nvidia-dgx-h100-libredfish",
                "nvidia-gb200-nvl-tray-libredfish")


@functools.cache
def _discovery_plan() -> list[tuple[Path, str, Path]]:
    """(mockup, URL path, recorded file) of every resource a discovery of each mockup reads."""
    from tests.fuzz.redfish_peer import mockup_files, peer

    plan = []
    for name in _BMC_MOCKUPS:
        root = CORPUS / "redfish" / name / "mockup"
        files = mockup_files(root)
        p = peer()
        p.tree, p.override, p.seen = _tree(root), None, []
        _discover(p.url)
        plan += [(root, path, files[path]) for path in dict.fromkeys(p.seen) if path in files]
    return plan


@functools.cache
def _tree(root: Path) -> dict[str, bytes]:
    from tests.fuzz.redfish_peer import load_mockup

    return load_mockup(root)


def _discover(url: str) -> Any:
    from provisioner.bmc.factory import open_redfish
    from provisioner.redfish.client import ClientOptions
    from provisioner.secrets import Secret

    options = ClientOptions(verify_tls=False, timeout_s=5, retries=0)
    bmc = open_redfish(url, "root", Secret("fuzz-canary-pw"), options, name="fuzz-bmc")
    try:
        return bmc.discover()
    finally:
        bmc.close()


def _redfish_discover(data: bytes, work: Path, seed: int) -> Any:
    """A whole discovery against a stand-in BMC serving the mockup with one resource mutated."""
    from tests.fuzz.redfish_peer import peer

    root, path, _ = _discovery_plan()[seed]
    p = peer()
    p.tree, p.override = _tree(root), (path, data)
    try:
        return _discover(p.url)
    finally:
        p.override = None


def _maas(model_name: str) -> Run:
    def run(data: bytes, work: Path) -> Any:
        from provisioner.deploy.maas import models
        from provisioner.deploy.maas.client import _parse

        doc = _json_or_none(data)
        model = getattr(models, model_name)
        items = doc if isinstance(doc, list) else [doc]
        out = []
        for item in items:
            obj = _parse(model, item, f"GET {model_name}")
            for prop in ("size_gb", "node_status", "macs", "describe", "line"):
                attr = getattr(obj, prop, None)
                out.append(attr() if callable(attr) else attr)
        return out

    return run


def targets() -> list[Target]:
    """All targets; the seeds are the real recordings and the project's own fixtures."""
    from cabling.errors import CablingError
    from provisioner.exceptions import ProvisionerError

    prov = (ProvisionerError,)
    cab = (CablingError,)
    ib = CORPUS / "ib"
    gpu = CORPUS / "pcie-gpu"
    health = FIX / "health"
    nvsmi = gpu / "nvidia-smi-q-8xh100-and-others-gpud"
    dmesg = gpu / "dmesg-nvrm-xid-gpud"
    redfish_dirs = [CORPUS / "redfish" / "sushy-unit-test-json-samples" / "json_samples",
                    *sorted(p for p in (CORPUS / "redfish").iterdir() if p.is_dir())]
    redfish_seeds = tuple(sorted({f for d in redfish_dirs for f in d.rglob("*.json")}))[:400]
    return [
        Target("inventory.load_site", (ROOT / "inventory/example/site.yml", FIX / "maas/site/site.yml",
                                       FIX / "health/site-48/site.yml"), _site, prov, "site.yml"),
        Target("inventory.secret_file", (FIX / "deploy/seed-meta-data",), _secret_file, prov,
               "site.yml"),
        Target("inventory.vault", (FIX / "deploy/seed-meta-data",), _vault, prov, "vault.yml",
               lambda b: b"bmc_password: " + b.splitlines()[0] + b"\nother: [1, 2]\n"),
        Target("cabling.manifest.yaml", (FIX / "cabling/small-fabric.yaml", FIX / "cabling/roce-plan.yaml"),
               _manifest(".yaml"), cab, "manifest.yaml"),
        Target("cabling.manifest.json", (FIX / "cabling/small-fabric.yaml", FIX / "cabling/roce-plan.yaml"),
               _manifest(".json"), cab, "manifest.json", _yaml_to_json),
        Target("cabling.manifest.cablelist", (FIX / "cabling/small-fabric.yaml", FIX / "cabling/roce-plan.yaml"),
               _manifest(".csv"), cab, "manifest.csv", _yaml_to_csv),
        Target("cabling.manifest.csv", (ib / "ufm-ndt-cabling-validation-dgx-a100-director/ndt/other/ndt.csv",
                                        ib / "ufm-ndt-cabling-validation-dgx-a100-director/ndt/other/ndth2s.csv"),
               _manifest(".csv"), cab, "manifest.csv"),
        Target("cabling.ndt", _files(ib / "ufm-ndt-cabling-validation-dgx-a100-director/ndt", "*/*.ndt"),
               _ndt, cab, "fabric.ndt"),
        Target("cabling.ibnetdiscover", (*_files(ib / "ibnetdiscover-ens-lyon-x5-qdr-ddr"),
                                         ib / "ufm-ndt-cabling-validation-dgx-a100-director/ibnetdiscover_director.txt"),
               _loader("cabling.discovery.ibnetdiscover", "load_ibnetdiscover", "fabric.txt"), cab,
               "fabric.txt"),
        Target("cabling.iblinkinfo", (FIX / "cabling/small-fabric.iblinkinfo",),
               _loader("cabling.discovery.iblinkinfo", "load_iblinkinfo", "links.txt"), cab, "links.txt"),
        Target("cabling.ibstat", _files(ib / "ibstat-a100-h100-gpud"),
               _loader("cabling.discovery.ibstat", "load_ibstat", "ibstat.txt"), cab, "ibstat.txt"),
        Target("cabling.ibstat_dir", _files(ib / "ibstat-a100-h100-gpud"), _ibstat_dir, cab, "gpu001.txt"),
        Target("cabling.node_name_map", _files(ib / "node-name-map-rdma-core-example"),
               _loader("cabling.discovery.nodemap", "load_node_name_map", "names.map"), cab, "names.map"),
        Target("cabling.guid_list", _files(ib / "node-name-map-rdma-core-example"), _guid_list, cab,
               "guids.txt"),
        Target("cabling.lldp", (*_files(FIX / "cabling/lldp"), *_files(FIX / "cabling/lldp-switch"),
                                *_files(CORPUS / "lldp/lldpctl-json-cumulus-bluefield-dpu-nvidia-bmm")),
               _loader("cabling.discovery.lldp", "load_lldp_dir", "gpu009.json"), cab, "gpu009.json"),
        *(Target(f"cabling.ufm.{r}", (FIX / f"cabling/ufm/{r}.json",), _ufm(r), cab, "ufm")
          for r in ("systems", "ports", "links")),
        Target("cli.inventory_check", (ROOT / "inventory/example/site.yml", FIX / "maas/site/site.yml"),
               _cli(lambda p: ["inventory", "check", str(p)], "site/site.yml", {0, 2}), prov),
        Target("cli.cabling_validate", (FIX / "cabling/small-fabric.yaml",),
               _cli(lambda p: ["cabling", "validate", "-m", str(p), "--iblinkinfo",
                               str(FIX / "cabling/small-fabric.iblinkinfo")], "fabric.yaml", {0, 2, 3}),
               prov),
        Target("health.nvsmi", (*_files(nvsmi, "*valid*"), *_files(health, "nvidia-smi-q.*")),
               _health("parse_nvsmi", "nvsmi"), prov),
        Target("health.nvlink_status", (nvsmi / "nvidia-smi.nvlink.status.a100",
                                        health / "nvlink-status.h100x2.one-inactive.txt"),
               _health("parse_nvlink_status", "nvlink"), prov),
        Target("health.nvlink_errors", _files(health, "nvlink-errors.*"),
               _health("parse_nvlink_errors", "nvlink"), prov),
        Target("health.lspci", (*_files(gpu / "lspci-vvv-hgx-h100-gpud"), *_files(health, "lspci-*")),
               _health("parse_lspci", "pcie"), prov),
        Target("health.pcie_bandwidth", _files(dmesg), _health("parse_bandwidth_warnings", "pcie", True), prov),
        Target("health.ibstat", (*_files(ib / "ibstat-a100-h100-gpud"), health / "ibstat.ndr-one-port-200g.txt"),
               _health("parse_ibstat", "ib"), prov),
        Target("health.ib_counters", _files(health, "ib-counters.*"), _health("parse_counters", "ib"), prov),
        Target("health.transceivers", (health / "mlxlink-m.two-ports.txt",),
               _health("parse_transceivers", "ib"), prov),
        Target("health.xid", (*_files(dmesg), *_files(health, "*.log")),
               _health("parse_kernel_log", "xid", True), prov),
        Target("health.serials", (*_files(dmesg), *_files(health, "*.log")),
               _health("serials_from_kernel_log", "xid", True), prov),
        Target("health.sections", _files(health, "*.txt")[:4], _health("parse_sections", "collector"), prov),
        Target("health.checks", (health / "README.md",), _health_checks, prov, convert=_collector_output),
        Target("redfish.parse", redfish_seeds, _redfish, prov),
        Target("redfish.discover", tuple(f for _, _, f in _discovery_plan()), _redfish, prov,
               run_seed=_redfish_discover),
        *(Target(f"maas.{m}", (FIX / f"maas/{f}.json",), _maas(m), prov)
          for m, f in (("Machine", "machine"), ("BlockDevice", "blockdevices"), ("Subnet", "subnets"),
                       ("NodeDevice", "devices-gpu"), ("BootResource", "boot-resources"))),
    ]


def check(target: Target, data: bytes, work: Path, seed: int = 0) -> BaseException | None:
    """Run one case; return the exception that breaks the rule (None: parsed or typed error)."""
    try:
        if target.run_seed is not None:
            target.run_seed(data, work, seed)
        else:
            target.run(data, work)
    except target.errors as exc:
        if target.names_file and target.names_file not in str(exc):
            return AssertionError(f"typed error does not name {target.names_file!r}: {exc}")
        return None
    except Exception as exc:  # the property: nothing else may escape
        return exc
    return None
