"""Every parser and loader the project has for outside input, with the real samples that seed it.

A target takes the bytes of one (mutated) input, writes them where the loader reads them, and calls
it. The property: the call returns, or raises the target's typed error; anything else is a bug.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import socketserver
import tempfile
import threading
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
    # Seeds this parser must refuse with its typed error (Path.match patterns): negative samples
    # and files of a neighbouring format, kept as seeds for what their mutations reach. Every
    # other seed must parse.
    refused: tuple[str, ...] = ()

    def refuses(self, seed: Path) -> bool:
        return any(seed.match(pattern) for pattern in self.refused)

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


class _Errors(logging.Handler):
    """Counts the records at ERROR and above (a request that failed inside a server)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@functools.cache
def _deploy_server() -> tuple[Any, _Errors]:
    """A live deploy server (one per process): a gated image, peer serving on."""
    from provisioner.deploy.embedded.http import DeployServer
    from provisioner.deploy.embedded.peers import PeerPool

    srv = DeployServer(bind="127.0.0.1", port=0, public_url="http://127.0.0.1", hold_s=0,
                       max_image_streams=2, retry_after_s=1, peers=PeerPool(linger_s=0))
    image = Path(tempfile.mkdtemp(prefix="fuzz-deploy-")) / "test.raw"
    image.write_bytes(bytes(range(256)) * 64)
    srv.files["images/test.raw"] = image
    srv.gated_files.add("images/test.raw")
    errors = _Errors()
    logging.getLogger("provisioner.deploy.http").addHandler(errors)
    srv.start()
    return srv, errors


def _deploy_http(data: bytes, work: Path) -> Any:
    """One raw request at the deploy server: answered (never a 500, never an error inside the
    server), and nothing served to h2 (its reservation is another address)."""
    from provisioner.deploy.embedded.sessions import HostSession
    from provisioner.secrets import Secret

    srv, errors = _deploy_server()
    sessions = {}
    for name, address, mac in (("h1", "127.0.0.1", "52:54:00:00:00:01"),
                               ("h2", "127.0.0.9", "52:54:00:00:00:02")):
        srv.unregister(name)  # a fresh attempt: tokens unused, no report, no peer
        sessions[name] = HostSession(
            host=name, mac=mac, method="image", ipxe_script="#!ipxe\n", address=address,
            config_env="DEPLOY_TOKEN='fuzz-token'\n", seed={"user-data": "#cloud-config\n"},
            autoinstall={"user-data": "#cloud-config\n"}, token=Secret("fuzz-token"),
            boot_token=Secret("fuzz-boot-token"), boot_key=Secret("fuzz-boot-key"),
            peer_key=Secret("fuzz-peer-key"), peer_port=8081)
        srv.register(sessions[name])
    before = errors.count
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # a body shorter than its length ends here, no wait
        except OSError:  # the server answered and closed before the whole request was sent
            pass
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    # an HTTP/0.9 request line gets http.server's bare error page (no status line)
    status = answer.split(b"\r\n", 1)[0].split(b" ") if answer.startswith(b"HTTP/") else []
    if (status[1:2] == [b"500"]) or (not status and b"Error code: 500" in answer):
        raise AssertionError(f"the server failed inside: {answer[:200]!r}")
    if errors.count != before:
        raise AssertionError("the deploy server logged an error for this request")
    h2 = sessions["h2"]
    if h2.image_streams or h2.image_sent_at is not None or h2.reports or h2.config_served:
        raise AssertionError("h2's stream, reports or configuration went to another address")
    return answer


@functools.cache
def _answer_server() -> tuple[str, dict[str, bytes]]:
    """An image server that answers every request with the current case's raw bytes."""
    state: dict[str, bytes] = {"answer": b""}

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(5)
            try:
                while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                    pass
                self.wfile.write(state["answer"])
            except OSError:
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/image.bin", state


def _image_fetch(data: bytes, work: Path) -> Any:
    """The bounded image fetch against one raw answer: a sha256, or a typed error."""
    from provisioner.deploy.images.fetch import FetchLimits, fetch

    url, state = _answer_server()
    state["answer"] = data
    limits = FetchLimits(max_bytes=1 << 20, cap_from="the fuzz cap", deadline_s=10,
                         reserve_bytes=0)
    return fetch(url, work / "image.bin", what="fuzzed image", limits=limits)


def _safetext(data: bytes, work: Path) -> Any:
    """Peer text through every output escape: nothing that acts survives, XML parses back,
    a Prometheus label stays one label."""
    import unicodedata
    import xml.etree.ElementTree as ET

    from provisioner.safetext import prom_label, terminal, xml, xml_tree

    text = data.decode("utf-8", "surrogateescape")
    acting = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    for shown in (terminal(text), prom_label(text)):
        bad = [c for c in shown if unicodedata.category(c) in acting]
        if bad:
            raise AssertionError(f"{bad[0]!r} survived escaping")
    root = ET.Element("case", message=text)
    root.text = text
    back = ET.fromstring(ET.tostring(xml_tree(root), encoding="unicode"))
    if back.get("message") != xml(text):
        raise AssertionError("an XML attribute did not survive")
    return back


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
               lambda b: b"bmc_password: '" + b.splitlines()[0].replace(b"'", b"''")
               + b"'\nother: [1, 2]\n"),
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
               _ndt, cab, "fabric.ndt", refused=("negative/*.ndt",)),
        Target("cabling.ibnetdiscover", (*_files(ib / "ibnetdiscover-ens-lyon-x5-qdr-ddr"),
                                         ib / "ufm-ndt-cabling-validation-dgx-a100-director/ibnetdiscover_director.txt"),
               _loader("cabling.discovery.ibnetdiscover", "load_ibnetdiscover", "fabric.txt"), cab,
               "fabric.txt", refused=("X5.map", "X5.spine", "X5.topology.conf")),
        Target("cabling.iblinkinfo", (FIX / "cabling/small-fabric.iblinkinfo",),
               _loader("cabling.discovery.iblinkinfo", "load_iblinkinfo", "links.txt"), cab, "links.txt"),
        Target("cabling.ibstat", _files(ib / "ibstat-a100-h100-gpud"),
               _loader("cabling.discovery.ibstat", "load_ibstat", "ibstat.txt"), cab, "ibstat.txt"),
        Target("cabling.ibstat_dir", _files(ib / "ibstat-a100-h100-gpud"), _ibstat_dir, cab, "gpu001.txt"),
        Target("cabling.node_name_map", _files(ib / "node-name-map-rdma-core-example"),
               _loader("cabling.discovery.nodemap", "load_node_name_map", "names.map"), cab, "names.map",
               refused=("*.rst",)),
        Target("cabling.guid_list", _files(ib / "node-name-map-rdma-core-example"), _guid_list, cab,
               "guids.txt", refused=("*.rst", "ib-node-name-map.example")),
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
               _health("parse_nvsmi", "nvsmi"), prov,
               refused=("nvidia-smi.*.out.0.valid",)),  # the plain summary table, not -q
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
        Target("deploy.http_request", _files(FIX / "fuzz/deploy-http"), _deploy_http, prov),
        Target("images.fetch", _files(FIX / "fuzz/image-answers"), _image_fetch, prov,
               refused=("redirect-*.http", "not-found.http")),
        Target("safetext", (*redfish_seeds[:40], *_files(health, "*.txt")[:10],
                            *_files(FIX / "fuzz/deploy-http")), _safetext, ()),
        *(Target(f"maas.{m}", (FIX / f"maas/{f}.json",), _maas(m), prov)
          for m, f in (("Machine", "machine"), ("BlockDevice", "blockdevices"), ("Subnet", "subnets"),
                       ("NodeDevice", "devices-gpu"), ("BootResource", "boot-resources"))),
    ]


def run_case(target: Target, data: bytes, work: Path, seed: int = 0) -> None:
    """Run one case; whatever it raises propagates."""
    if target.run_seed is not None:
        target.run_seed(data, work, seed)
    else:
        target.run(data, work)


def check(target: Target, data: bytes, work: Path, seed: int = 0) -> BaseException | None:
    """Run one case; return the exception that breaks the rule (None: parsed or typed error)."""
    try:
        run_case(target, data, work, seed)
    except target.errors as exc:
        if target.names_file and target.names_file not in str(exc):
            return AssertionError(f"typed error does not name {target.names_file!r}: {exc}")
        return None
    except Exception as exc:  # the property: nothing else may escape
        return exc
    return None
