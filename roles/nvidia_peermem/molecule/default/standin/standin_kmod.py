#!/usr/bin/python3
"""Stand-in modinfo/modprobe/dmesg for the nvidia_peermem scenario: a container cannot load
kernel modules. nvidia_peermem "loads" into a stand-in sysfs tree (/var/lib/standin-nvidia/sys,
the role's nvidia_peermem_sysfs_root in the scenario) and, like the real module on an OFED
kernel, registers the nv_mem peer-memory client there. /var/lib/standin-nvidia/peermem-mode
selects the failure cases: `unregistered` (loads, logs the real-format registration error, no
client) or `missing` (no module for this kernel). Other modules go to the real tools."""
import os
import shutil
import sys
from pathlib import Path

BASE = Path("/var/lib/standin-nvidia")
SYS = BASE / "sys"
KMSG = BASE / "kmsg.log"
DRIVER_VERSION = "550.127.08"
REAL = {"modinfo": "/sbin/modinfo", "modprobe": "/sbin/modprobe", "dmesg": "/bin/dmesg"}


def mode() -> str:
    f = BASE / "peermem-mode"
    return f.read_text().strip() if f.exists() else "registered"


def kernel_log(line: str) -> None:
    with KMSG.open("a") as f:
        f.write(line + "\n")


def main(prog: str, argv: list[str]) -> int:
    # The module name is the first word that is neither an option nor an option's value.
    words = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in ("-F", "-k"))]
    module = words[0] if words else ""
    if prog == "dmesg":
        print(KMSG.read_text() if KMSG.exists() else "", end="")
        return 0
    if module.replace("-", "_") != "nvidia_peermem":
        os.execv(REAL[prog], [REAL[prog], *argv])
    if mode() == "missing":
        print(f"{prog}: ERROR: Module nvidia_peermem not found.", file=sys.stderr)
        return 1
    if prog == "modinfo":
        if argv[:2] == ["-F", "version"]:
            print(DRIVER_VERSION)
        else:
            print(f"filename:       /lib/modules/{os.uname().release}/updates/dkms/nvidia-peermem.ko\n"
                  f"version:        {DRIVER_VERSION}\nlicense:        Linux-OpenIB\n"
                  "description:    NVIDIA GPU memory plug-in\nname:           nvidia_peermem")
        return 0
    moddir = SYS / "module" / "nvidia_peermem"
    client = SYS / "kernel" / "mm" / "memory_peers" / "nv_mem"
    if "-r" in argv:
        shutil.rmtree(moddir, ignore_errors=True)
        shutil.rmtree(client, ignore_errors=True)
        return 0
    if moddir.exists():
        return 0
    moddir.mkdir(parents=True)
    (moddir / "version").write_text(DRIVER_VERSION + "\n")
    if mode() == "unregistered":
        kernel_log("[  227.996636] nvidia-peermem nv_mem_client_init:596 ERROR error while registering traditional client")
    else:
        client.mkdir(parents=True)
        (client / "version").write_text(DRIVER_VERSION + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[0]).name, sys.argv[1:]))
