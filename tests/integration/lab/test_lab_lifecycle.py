"""A real 2-host lab: up, BMCs over HTTPS, discover, PXE through `provision boot pxe` and
`provision power cycle` (seen on the wire), an HDD boot override, idempotence, repair, down.

Runs libvirt (qemu TCG), sushy-emulator and tcpdump for real, in its own namespace and
address slot so it never disturbs a lab someone is using on the same machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.lab import daemons
from provisioner.lab.netns import in_netns, netns_exists, netns_pids, pid_alive
from provisioner.lab.network import free_slot
from provisioner.lab.plan import LabPlan
from provisioner.state import StateStore
from tests.support import machine
from tests.support.waiting import wait_until

pytestmark = pytest.mark.lab

NETNS = f"plabit{os.getpid() % 1000:03d}"  # unique per run: labs of others may be up
runner = CliRunner()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    machine.require("root", "tun")
    machine.fail_if_missing(daemons.missing_tools(), "scripts/deps/20-lab.list")
    mp = pytest.MonkeyPatch()
    inventory = tmp_path_factory.mktemp("lab-inventory")
    mp.setenv("PROVISIONER_LAB_NETNS", NETNS)
    mp.setenv("PROVISIONER_LAB_SLOT", str(free_slot(NETNS)))
    mp.setenv("PROVISIONER_INVENTORY", str(inventory))
    mp.delenv("PROVISIONER_LAB_STATE_DIR", raising=False)
    mp.setenv("PROVISIONER_STATE_DIR", str(tmp_path_factory.mktemp("lab-node-state")))
    runner.invoke(app, ["lab", "down"])  # a previous run killed half-way
    res = runner.invoke(app, ["lab", "up", "--hosts", "2", "--disks", "3", "--memory", "512"])
    assert res.exit_code == 0, res.output
    plan = LabPlan.from_env(hosts=2, disks=3, memory_mib=512)
    yield plan
    runner.invoke(app, ["lab", "down"])
    mp.undo()


class _Client:
    """Requests with the BMC's credentials and the lab CA, passed per request: a Session's
    ``verify`` loses to $REQUESTS_CA_BUNDLE, which CI machines often set."""

    def __init__(self, auth: tuple[str, str], verify: str) -> None:
        self.auth, self.verify = auth, verify

    def get(self, url: str, **kw) -> requests.Response:
        return requests.get(url, auth=self.auth, verify=self.verify, **kw)

    def patch(self, url: str, **kw) -> requests.Response:
        return requests.patch(url, auth=self.auth, verify=self.verify, **kw)

    def post(self, url: str, **kw) -> requests.Response:
        return requests.post(url, auth=self.auth, verify=self.verify, **kw)


def _bmc(plan: LabPlan, index: int) -> tuple[str, _Client]:
    site = load_site("lab")
    host = site.host(plan.host(index).name)
    creds = resolve_credentials(site, host.bmc.credentials)
    ca = str(site.resolve_path(site.settings.redfish.ca_bundle))
    return host.bmc.url, _Client((creds.username, creds.password.reveal()), ca)


def _system(base: str, session: _Client) -> str:
    res = session.get(f"{base}/redfish/v1/Systems", timeout=10)
    res.raise_for_status()
    members = res.json()["Members"]
    assert len(members) == 1  # each BMC shows only its own server
    return base + members[0]["@odata.id"]


def test_generated_site_loads_with_both_hosts(lab):
    site = load_site("lab")
    assert site.path == lab.site_path
    assert [h.name for h in site.hosts] == ["lab-host01", "lab-host02"]
    net = 16 * lab.slot
    assert [h.bmc.url for h in site.hosts] == [
        f"https://198.19.{net}.11:443",
        f"https://198.19.{net}.12:443",
    ]


def test_lab_traffic_has_no_way_out_of_the_machine(lab):
    def ip(*args: str) -> list[dict]:
        out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
        return json.loads(out.stdout or "[]")

    assert ip("-n", NETNS, "route", "show", "default") == []
    nets = {r["dst"] for r in ip("-n", NETNS, "route", "show")}
    assert nets == {str(n) for n in (*lab.routed_nets, lab.uplink_net)}
    for net in lab.routed_nets:
        (route,) = ip("route", "show", "exact", str(net))
        assert route["dev"] == lab.host_uplink
        assert route["gateway"] == str(lab.netns_uplink_address)
    for host in lab.lab_hosts:  # the VMs' root-side links carry no address at all
        for link in (host.prov_veth_host, host.data_veth_host):
            (info,) = ip("addr", "show", "dev", link)
            assert info["addr_info"] == []


def test_apt_proxy_serves_the_debian_archive_to_the_lab_and_nothing_else(lab):
    """From inside the namespace (where the VMs' traffic goes), as apt on a VM would."""
    proxy = f"http://{lab.host_uplink_address}:3142"
    assert load_site("lab").settings.apt_proxy == proxy

    def fetch(url: str) -> str:
        argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "-m", "60", url]
        return subprocess.run(in_netns(argv, NETNS), capture_output=True, text=True).stdout

    assert fetch("http://deb.debian.org/debian/dists/bookworm/InRelease") == "200"
    assert fetch("http://download.docker.com/linux/debian/gpg") == "403"
    assert fetch("https://download.docker.com/linux/debian/gpg") == "000"  # no CONNECT


def test_each_bmc_answers_redfish_over_tls_with_its_own_credentials(lab):
    for index in (1, 2):
        base, session = _bmc(lab, index)
        plan_host = lab.host(index)
        system = _system(base, session)
        doc = session.get(system, timeout=10).json()
        assert doc["UUID"] == plan_host.uuid
        nics = session.get(f"{system}/EthernetInterfaces", timeout=10).json()["Members"]
        macs = {m["@odata.id"].rsplit("/", 1)[-1].lower() for m in nics}
        assert macs == {plan_host.provisioning_mac, plan_host.data_mac}
        storage = session.get(f"{system}/Storage/1", timeout=10).json()
        serials = [
            session.get(base + d["@odata.id"], timeout=10).json()["SerialNumber"]
            for d in storage["Drives"]
        ]
        assert serials == list(plan_host.disk_serials)
    base1, s1 = _bmc(lab, 1)
    _, s2 = _bmc(lab, 2)
    wrong = requests.get(f"{base1}/redfish/v1/Systems", auth=s2.auth, verify=s1.verify, timeout=10)
    assert wrong.status_code == 401  # host 2's password does not open host 1's BMC
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{base1}/redfish/v1/", timeout=10)  # not trusted without the lab CA


def test_discover_sees_both_hosts_with_their_macs_and_disks(lab):
    res = runner.invoke(app, ["discover", "--site", "lab", "--json"])
    assert res.exit_code == 0, res.output
    found = {h["host"]: h["facts"] for h in json.loads(res.stdout)}
    for index in (1, 2):
        want = lab.host(index)
        assert found[want.name]["provisioning_mac"] == want.provisioning_mac
    store = StateStore.for_site(load_site("lab"))
    for index in (1, 2):
        want = lab.host(index)
        facts = store.get(want.name).facts
        assert facts["provisioning_mac"] == want.provisioning_mac
        assert [d["serial"] for d in facts["drives"]] == list(want.disk_serials)


def test_a_second_lab_on_the_same_addresses_is_refused(lab, monkeypatch):
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plabclash")
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", f"{lab.state_dir}-clash")
    res = runner.invoke(app, ["lab", "up", "--hosts", "1"])
    assert res.exit_code == 5
    assert f"already routed via {NETNS}-h" in res.output
    assert not netns_exists("plabclash")
    res = runner.invoke(app, ["lab", "down"])
    assert res.exit_code == 0 and "nothing to remove" in res.output
    assert lab.site_path.exists()  # plabit's site is not plabclash's to remove


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    return {link["ifname"] for link in json.loads(out.stdout)}


def test_up_twice_keeps_everything_and_duplicates_nothing(lab):
    before_pids = set(netns_pids(NETNS))
    before_links = _root_links()
    domains = subprocess.run(
        ["virsh", "-q", "list", "--all", "--name"], capture_output=True, text=True, check=True
    ).stdout.split()
    res = runner.invoke(app, ["lab", "up"])
    assert res.exit_code == 0, res.output
    assert set(netns_pids(NETNS)) == before_pids
    assert _root_links() == before_links
    after = subprocess.run(
        ["virsh", "-q", "list", "--all", "--name"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(after) == sorted(domains)
    assert sorted(d for d in after if d.startswith(f"{NETNS}-")) == [
        f"{NETNS}-host01",
        f"{NETNS}-host02",
    ]


def _capture(bridge: str, out: Path) -> subprocess.Popen:
    fh = out.open("w")
    proc = subprocess.Popen(
        in_netns(["tcpdump", "-l", "-n", "-i", bridge, "udp", "port", "67"], NETNS),
        stdout=fh,
        stderr=subprocess.STDOUT,
    )
    wait_until(lambda: "listening on" in out.read_text(), "tcpdump to listen")
    return proc


def _power(host: str, verb: str) -> str:
    res = runner.invoke(app, ["power", verb, host, "--site", "lab", "--json"])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_pxe_boot_through_the_cli_makes_the_vm_ask_for_dhcp(lab, tmp_path):
    """`provision boot pxe` + `provision power cycle` make the VM PXE-boot: its provisioning
    NIC asks for DHCP on provbr0, seen with tcpdump; the data NIC never asks."""
    host = lab.host(1)
    prov = _capture("provbr0", tmp_path / "provbr0.txt")
    data = _capture("provbr1", tmp_path / "provbr1.txt")
    try:
        res = runner.invoke(app, ["boot", "pxe", host.name, "--site", "lab"])
        assert res.exit_code == 0, res.output
        _power(host.name, "cycle")
        assert json.loads(_power(host.name, "status"))[0]["detail"] == "On"
        want = f"Request from {host.provisioning_mac}"
        wait_until(lambda: want in (tmp_path / "provbr0.txt").read_text(),
                   f"{host.name} to ask for DHCP on provbr0")
    finally:
        runner.invoke(app, ["power", "off", host.name, "--site", "lab"])
        for proc in (prov, data):
            proc.terminate()
            proc.wait(timeout=10)
    assert json.loads(_power(host.name, "status"))[0]["detail"] == "Off"
    # The second NIC has no boot ROM: nothing may ever ask for DHCP on the data network.
    assert "BOOTP" not in (tmp_path / "provbr1.txt").read_text()
    assert lab.console_log(host).stat().st_size > 0


# A boot sector that writes a marker to COM1 (the console log) and halts: it shows which
# disk the firmware booted. Real-mode code at 0x7c00: cld; ds=0; si=msg; dx=0x3f8;
# loop: lodsb; or al,al; jz end; out dx,al; jmp loop; end: jmp $.
_MARKER = b"PLAB-ROOT-DISK-BOOTED"
_BOOT_SECTOR = (
    bytes.fromhex("fc31c08ed8be157cbaf803ac08c07403eeebf8ebfe") + _MARKER + b"\0"
).ljust(510, b"\0") + b"\x55\xaa"


def test_hdd_boot_override_boots_the_root_disk_not_the_first_one(lab, tmp_path):
    # SeaBIOS boots only the first disk of the boot order and sushy orders disks as libvirt
    # lists them, so the lab must list the root disk first although the guest sees it last.
    host = lab.host(1)
    sector = tmp_path / "mbr.bin"
    sector.write_bytes(_BOOT_SECTOR)
    root = lab.disk_path(host, lab.root_disk_index)
    subprocess.run(
        ["qemu-io", "-f", "qcow2", "-c", f"write -q -s {sector} 0 512", str(root)], check=True
    )
    base, session = _bmc(lab, 1)
    system = _system(base, session)
    boot = {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Once"}
    assert session.patch(system, json={"Boot": boot}, timeout=10).status_code in (200, 204)
    reset = f"{system}/Actions/ComputerSystem.Reset"
    try:
        assert session.post(reset, json={"ResetType": "On"}, timeout=30).status_code in (200, 204)
        deadline = time.monotonic() + 90
        while _MARKER not in lab.console_log(host).read_bytes():
            assert time.monotonic() < deadline, lab.console_log(host).read_bytes()[-400:]
            time.sleep(0.5)
    finally:
        session.post(reset, json={"ResetType": "ForceOff"}, timeout=30)


def test_status_shows_vms_and_answering_bmcs(lab):
    res = runner.invoke(app, ["lab", "status", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["up"] is True and doc["netns"] == NETNS
    assert doc["apt_proxy"] == f"http://{lab.host_uplink_address}:3142"
    assert [(h["name"], h["power"], h["bmc_answers"]) for h in doc["hosts"]] == [
        ("lab-host01", "Off", True),
        ("lab-host02", "Off", True),
    ]


def test_up_repairs_a_dead_bmc_and_a_lost_link_and_grows_the_lab(lab):
    dead = lab.host(2)
    bmc_pid = int((lab.bmc_dir(dead) / "sushy.pid").read_text())
    os.kill(bmc_pid, 9)
    subprocess.run(["ip", "link", "del", dead.data_veth_host], check=True)
    res = runner.invoke(app, ["lab", "up", "--hosts", "3"])
    assert res.exit_code == 0, res.output
    assert dead.data_veth_host in _root_links()
    doc = json.loads(runner.invoke(app, ["lab", "status", "--json"]).output)
    assert doc["up"] is True
    assert [h["name"] for h in doc["hosts"]] == ["lab-host01", "lab-host02", "lab-host03"]
    assert doc["hosts"][1]["bmc_pid"] != bmc_pid
    assert [h.name for h in load_site("lab").hosts][-1] == "lab-host03"
    shrink = runner.invoke(app, ["lab", "up", "--hosts", "2"])
    assert shrink.exit_code == 2 and "provision lab down" in shrink.output


def test_down_after_a_crash_leaves_nothing(lab):
    bmc_pids = netns_pids(NETNS)
    # What a crash and a deploy leave behind: a dead BMC, a lost manifest, a stray dnsmasq.
    os.kill(bmc_pids[0], 9)
    lab.manifest_path.unlink()
    stray = subprocess.Popen(
        in_netns(
            [
                "dnsmasq",
                "--keep-in-foreground",
                "--port=0",
                "--interface=provbr0",
                "--bind-interfaces",
                f"--dhcp-range=198.18.{16 * lab.slot}.100,198.18.{16 * lab.slot}.110",
                f"--pid-file={lab.state_dir}/stray.pid",
                "--leasefile-ro",
            ],
            NETNS,
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: (lab.state_dir / "stray.pid").exists(), "the stray dnsmasq to start")
    res = runner.invoke(app, ["lab", "down"])
    assert res.exit_code == 0, res.output
    stray.wait(timeout=10)
    assert not netns_exists(NETNS)
    assert (
        NETNS not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    assert not any(pid_alive(p) for p in [*bmc_pids, stray.pid])
    assert not [name for name in _root_links() if lab.owns_link(name)]
    # libvirtd itself is gone when the lab started it and no VM is left (as on a fresh CI
    # machine); libvirt's persistent config must not know the lab either way.
    if daemons.find_pids("libvirtd"):
        domains = subprocess.run(
            ["virsh", "-q", "list", "--all", "--name"], capture_output=True, text=True, check=True
        ).stdout.split()
        assert not [d for d in domains if d.startswith(f"{NETNS}-")]
        pools = subprocess.run(
            ["virsh", "-q", "pool-list", "--all", "--name"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert lab.pool_name not in pools
    assert not Path(f"/etc/libvirt/storage/{lab.pool_name}.xml").exists()
    assert not list(Path("/etc/libvirt/qemu").glob(f"{NETNS}-*.xml"))
    assert not lab.state_dir.exists()
    assert not lab.site_path.exists() and not lab.ca_bundle_path.exists()
    cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    assert not [c for c in cmdlines if str(lab.state_dir).encode() in c]
    again = runner.invoke(app, ["lab", "down"])
    assert again.exit_code == 0 and "nothing to remove" in again.output
