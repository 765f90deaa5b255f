"""The shell script run on each host (one SSH session) and the parser of its sectioned output.

One session per host does everything: it reads the error counters, waits the counter interval,
reads them again, prints every other section, and (with a textfile directory) then reads the
node_exporter textfile the client sends back on the same session's stdin and installs it. A
section records the command's exit status so a missing tool (127) is told apart from an empty
answer.

The counters come first so that every host's wait overlaps with every other's and nothing big
is held while hosts wait: the large sections (lspci -vvv is ~1 MB on an HGX board) are printed
after the second read, when the client is ready to parse them (``COLLECT`` marks the point). The
script arrives on bash's stdin, which bash reads byte by byte from a pipe, so the textfile that
follows the ``READY`` marker is read by the script itself (``TEXTFILE <bytes>`` and the bytes).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from provisioner.health.config import Expectations
from provisioner.health.ib import IB_ERROR_COUNTERS
from provisioner.health.textfile import TEXTFILE_NAME

BEGIN = "@@PROVISIONER-HEALTH-BEGIN"
END = "@@PROVISIONER-HEALTH-END"
COLLECT = "@@PROVISIONER-HEALTH-COLLECT"  # the counters are read twice; the big sections follow
READY = "@@PROVISIONER-HEALTH-READY"  # collection done: the script reads the textfile on stdin
MAX_TEXTFILE = 1 << 20

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
# The sysfs PCIe tree: NUMA node and link of every GPU/NIC/bridge, RDMA device -> PCI address,
# and the slot table (slot name -> bus:device) that names where a technician finds a card.
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
  for s in /sys/bus/pci/slots/*; do
    [ -r "$s/address" ] && echo "slot ${{s##*/}} $(cat "$s/address")"
  done
  return 0
}}
# lspci -vvv of an HGX board is ~1 MB, 40% of it uncore "System peripheral" functions no check
# reads: only GPUs/displays, host and PCI bridges, NVSwitches and network functions are kept
# (a function printed without a class id is kept: nothing to judge it by).
pci() {{
  have lspci || return 127
  $SUDO lspci -vvv -nn -D | awk 'BEGIN {{ RS = ""; ORS = "\\n\\n" }}
    {{ split($0, l, "\\n")
       if (l[1] !~ /^[^ ]+ [^[]*\\[[0-9a-f][0-9a-f][0-9a-f][0-9a-f]\\]: / ||
           l[1] ~ / \\[(0300|0302|0380|0600|0604|0680|0200|0207|0280)\\]: /) print }}'
  return "${{PIPESTATUS[0]}}"
}}
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


def collector_script(exp: Expectations, *, deep: bool = False, textfile_dir: str | None = None,
                     wait_for_go: bool = False) -> str:
    """The bash script printing every section the checks need for this host; with
    ``textfile_dir`` it then installs the node_exporter textfile sent on its stdin. With
    ``wait_for_go`` it waits after ``COLLECT`` for a line (or the end) on its stdin before it
    prints the big sections: the client says when it can take them, so no host's ~1 MB waits
    in the buffers of its ssh client (about 1 MiB each) meanwhile."""
    s = exp.settings
    lines = [_PRELUDE.replace("{COUNTERS}", " ".join(IB_ERROR_COUNTERS))]
    add = lines.append
    add('sec meta sh -c \'echo "hostname=$(hostname)"; echo "kernel=$(uname -r)"; echo "uid=$(id -u)"\'')
    add("sec nvlink_errors_0 opt nvidia-smi nvlink -e")
    add("sec ib_counters_0 ibcounters")
    add(f"sleep {s.counter_interval_s:g}")
    add("sec nvlink_errors_1 opt nvidia-smi nvlink -e")
    add("sec ib_counters_1 ibcounters")
    head, lines = lines, []  # what follows COLLECT: the big sections
    add = lines.append
    add("sec nvsmi opt nvidia-smi -q")
    add("sec nvlink_status opt nvidia-smi nvlink --status")
    add("sec topo opt nvidia-smi topo -m")
    add("sec pci_sysfs pcisysfs")
    add("sec ibstat opt ibstat")
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
    define, install = _textfile_install(textfile_dir) if textfile_dir is not None else ("", "")
    if not wait_for_go:
        tail = [f'echo "{COLLECT}"', *lines, define, install]
    else:
        # bash reads its script from the pipe as it runs it: a `read` reads what follows the
        # script only on the script's last line, so the big sections wait in a function that
        # the last line calls after the client's line.
        last = f'echo "{COLLECT}"; IFS= read -r _go || true; collect' + (f"; {install}" if install else "")
        tail = ["collect() {", *lines, ":", "}", define, last]
    return "\n".join([*head, *(ln for ln in tail if ln)]) + "\n"


def _textfile_install(directory: str) -> tuple[str, str]:
    """Read ``TEXTFILE <bytes>`` and the bytes from stdin, write them atomically (temp file and
    rename in the same directory: node_exporter never reads half a file); exit right after, so
    nothing that follows on stdin is ever run. (The function's definition, the line that runs
    it: it must be the script's last, so that stdin holds only what the client sends.)"""
    d = directory.rstrip("/") or "/"
    qd = shlex.quote(d)
    final = shlex.quote(f"{d.rstrip('/')}/{TEXTFILE_NAME}")
    return f"""textfile() {{
  IFS= read -r hdr || return 0
  case "$hdr" in "TEXTFILE "*) n=${{hdr#TEXTFILE }} ;; *) return 0 ;; esac
  case "$n" in ''|*[!0-9]*) echo "bad textfile length"; return 2 ;; esac
  [ "$n" -le {MAX_TEXTFILE} ] || {{ echo "textfile too large"; return 2; }}
  $SUDO mkdir -p {qd} && t=$($SUDO mktemp {qd}/.{TEXTFILE_NAME}.XXXXXX) || return 1
  head -c "$n" | $SUDO tee "$t" >/dev/null
  if [ "$($SUDO stat -c %s "$t")" != "$n" ]; then $SUDO rm -f "$t"; echo "textfile cut short"; return 1; fi
  $SUDO chmod 0644 "$t" && $SUDO mv -f "$t" {final}
}}""", (f'echo "{READY}"; echo "{BEGIN} textfile"; textfile 2>&1; rc=$?; echo; '
        f'echo "{END} textfile rc=$rc"; exit 0')


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


_MARKER = re.compile(rf"(?:{re.escape(BEGIN)} (?P<begin>.*)|{re.escape(END)} (?P<name>\S+) "
                     rf"rc=(?P<rc>[0-9]{{1,9}}))$", re.MULTILINE)
_PREFIX = "@@PROVISIONER-HEALTH-"  # what BEGIN and END start with
# Line breaks str.splitlines() knows besides "\n": a section holding one is split line by line.
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # each looked for with `in` (fast search)


def _section_text(raw: str) -> str:
    """A section's lines (the slice between its markers) without the collector's closing
    newline, line breaks normalised to "\n"."""
    if any(brk in raw for brk in _OTHER_BREAKS):
        text = "\n".join(raw.splitlines())
        return text[:-1] if text.endswith("\n") else text
    text = raw[:-1] if raw.endswith("\n") else raw  # the END marker's line start
    return text[:-1] if text.endswith("\n") else text  # the collector's `echo`


def _markers(output: str) -> Iterator[re.Match[str]]:
    """The BEGIN/END marker lines of ``output``, in order."""
    pos = output.find(_PREFIX)
    while pos >= 0:
        if pos == 0 or output[pos - 1] == "\n":
            m = _MARKER.match(output, pos)
            if m is not None:
                yield m
        pos = output.find(_PREFIX, pos + 1)


def parse_sections(output: str) -> dict[str, Section]:
    """Split the script's output into sections by name (a cut-off section is dropped).

    Markers are found by a plain substring search over the ~1 MB of a GPU host's output, each
    hit at a line's start then matched (a line-by-line loop, or a regular expression tried at
    every position, was most of the parse time at fleet scale)."""
    sections: dict[str, Section] = {}
    name: str | None = None
    start = 0
    for m in _markers(output):
        if m.group("begin") is not None:
            name, start = m.group("begin").strip(), m.end() + 1
        elif name is not None and m.group("name") == name:
            sections[name] = Section(name, int(m.group("rc")), _section_text(output[start:m.start()]))
            name = None
    return sections
