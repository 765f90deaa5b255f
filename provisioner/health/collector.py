"""The shell script run on each host (one SSH session) and the parser of its sectioned output.

One session per host runs every collector and prints delimited sections; that is far faster
than one SSH round-trip per check over hundreds of hosts. A section records the command's exit
status so a missing tool (127) is told apart from an empty answer.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from provisioner.health.config import Expectations
from provisioner.health.ib import IB_ERROR_COUNTERS

BEGIN = "@@PROVISIONER-HEALTH-BEGIN"
END = "@@PROVISIONER-HEALTH-END"

_PRELUDE = f"""\
set +e
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin:/usr/local/sbin"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi
# stdin of every collector is /dev/null: this script itself arrives on bash's stdin.
sec() {{ name=$1; shift; echo "{BEGIN} $name"; "$@" 2>&1 </dev/null; rc=$?; echo; echo "{END} $name rc=$rc"; }}
have() {{ command -v "$1" >/dev/null 2>&1; }}
ibcounters() {{
  have_any=127
  for d in /sys/class/infiniband/*/ports/*/counters; do
    [ -d "$d" ] || continue; have_any=0
    port=$(echo "$d" | awk -F/ '{{print $5"/"$7}}')
    for c in {{COUNTERS}}; do [ -r "$d/$c" ] && echo "$port $c $(cat "$d/$c")"; done
  done
  return $have_any
}}
kernlog() {{
  $SUDO dmesg --time-format=iso 2>/dev/null || $SUDO journalctl -k -b -o short-iso --no-pager
}}
kernerr() {{
  $SUDO dmesg --level=emerg,alert,crit,err --time-format=iso 2>/dev/null \\
    || $SUDO journalctl -k -b -p err -o short-iso --no-pager
}}
opt() {{ have "$1" || return 127; "$@"; }}
# The sysfs PCIe tree: NUMA node and link of every GPU/NIC/bridge, and RDMA device -> PCI address.
pcisysfs() {{
  [ -d /sys/bus/pci/devices ] || return 127
  for d in /sys/bus/pci/devices/*; do
    c=$(cat "$d/class" 2>/dev/null)
    case "$c" in 0x0300*|0x0302*|0x0207*|0x0200*|0x0604*) ;; *) continue ;; esac
    echo "pci ${{d##*/}} class=$c numa=$(cat "$d/numa_node" 2>/dev/null)" \
      "width=$(cat "$d/current_link_width" 2>/dev/null)/$(cat "$d/max_link_width" 2>/dev/null)" \
      "speed=$(cat "$d/current_link_speed" 2>/dev/null | tr -d ' ')/$(cat "$d/max_link_speed" 2>/dev/null | tr -d ' ')"
  done
  for r in /sys/class/infiniband/*; do
    [ -e "$r/device" ] && echo "rdma ${{r##*/}} $(basename "$(readlink -f "$r/device")")"
  done
  return 0
}}
pci() {{ have lspci || return 127; $SUDO lspci -vvv -nn -D; }}
transceivers() {{
  have mlxlink || return 127
  for d in /sys/class/infiniband/*; do
    [ -e "$d" ] || continue; echo "== ${{d##*/}}"; $SUDO mlxlink -d "${{d##*/}}" -m
  done
}}
gpumatmul() {{
  have python3 && python3 -c "import torch" 2>/dev/null || return 127
  CUDA_DEVICE_ORDER=PCI_BUS_ID python3 - <<'PY'
import time, torch
n = 8192
for i in range(torch.cuda.device_count()):
    dev = torch.device("cuda", i)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(dev)
    t0, reps = time.perf_counter(), 50
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize(dev)
    dt = time.perf_counter() - t0
    print(f"gpu={{i}} tflops={{2 * n**3 * reps / dt / 1e12:.1f}}")
PY
}}
"""


def collector_script(exp: Expectations, *, deep: bool = False) -> str:
    """The bash script printing every section the checks need for this host."""
    s = exp.settings
    lines = [_PRELUDE.replace("{COUNTERS}", " ".join(IB_ERROR_COUNTERS))]
    add = lines.append
    add('sec meta sh -c \'echo "hostname=$(hostname)"; echo "kernel=$(uname -r)"; echo "uid=$(id -u)"\'')
    add("sec nvsmi opt nvidia-smi -q")
    add("sec nvlink_status opt nvidia-smi nvlink --status")
    add("sec nvlink_errors_0 opt nvidia-smi nvlink -e")
    add("sec topo opt nvidia-smi topo -m")
    add("sec pci_sysfs pcisysfs")
    add("sec ibstat opt ibstat")
    add("sec ib_counters_0 ibcounters")
    if exp.ib_ports and exp.firmware.get("transceiver_firmware"):
        add("sec transceivers transceivers")
    add("sec lspci pci")
    add("sec kernel_log kernlog")
    add("sec kernel_errors kernerr")
    if exp.nvswitch:
        # nv-fabricmanager logs NVSwitch errors it handled itself, some of which never reach dmesg.
        add("sec fabricmanager_log sh -c '[ -r /var/log/fabricmanager.log ] || exit 127; "
            "tail -n 5000 /var/log/fabricmanager.log'")
    add("sec modules cat /proc/modules")
    add("sec df df -P -B1 -x tmpfs -x devtmpfs -x overlay -x squashfs -x efivarfs")
    add("sec zpool opt zpool list -H -o name,health,capacity")
    add("sec docker_info opt docker info --format '{{json .}}'")
    if exp.gpus > 0 and s.docker_gpu_image:
        add(f"sec docker_gpu opt docker run --rm --gpus all {shlex.quote(s.docker_gpu_image)} "
            "nvidia-smi -L")
    if exp.dcgm_expected:
        add(f"sec dcgm opt curl -fsS --max-time 5 {shlex.quote(s.dcgm_exporter_url)}")
    if deep and exp.gpus > 0:
        # dcgmi diag runs in the background so that the PCIe links and nvidia-smi are read
        # while the GPUs are busy: idle GPUs downclock their link, which is not a fault.
        level = s.dcgm_diag_level
        add(f'diag=$(mktemp); ( dcgmi diag -r {level} -j >"$diag" 2>&1 </dev/null; echo $? >"$diag.rc" ) &')
        add("diag_pid=$!; sleep 20")
        add("sec lspci_loaded pci")
        add("sec nvsmi_loaded opt nvidia-smi -q")
        add('wait "$diag_pid"')
        add('sec dcgm_diag sh -c \'cat "$0"; exit "$(cat "$0.rc")"\' "$diag"')
        add('rm -f "$diag" "$diag.rc"')
        add("sec nvbandwidth opt nvbandwidth -t device_to_device_memcpy_read_ce")
        add("sec gpu_matmul gpumatmul")
    add(f"sleep {s.counter_interval_s:g}")
    add("sec nvlink_errors_1 opt nvidia-smi nvlink -e")
    add("sec ib_counters_1 ibcounters")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Section:
    """One collector's output on one host."""

    name: str
    rc: int
    text: str

    @property
    def missing(self) -> bool:
        """The tool is not installed (or the path does not exist) on the host."""
        return self.rc == 127

    @property
    def ok(self) -> bool:
        """Exit status 0."""
        return self.rc == 0


_END = re.compile(rf"^{re.escape(END)} (?P<name>\S+) rc=(?P<rc>[0-9]{{1,9}})$")


def parse_sections(output: str) -> dict[str, Section]:
    """Split the script's output into sections by name (a cut-off section is dropped)."""
    sections: dict[str, Section] = {}
    name: str | None = None
    buf: list[str] = []
    for line in output.splitlines():
        if line.startswith(BEGIN + " "):
            name, buf = line[len(BEGIN) + 1 :].strip(), []
            continue
        m = _END.match(line)
        if m and name is not None and name == m.group("name"):
            text = "\n".join(buf)
            sections[name] = Section(name, int(m.group("rc")), text[:-1] if text.endswith("\n") else text)
            name = None
            continue
        if name is not None:
            buf.append(line)
    return sections
