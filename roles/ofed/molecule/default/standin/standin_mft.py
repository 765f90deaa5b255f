#!/usr/bin/python3
"""Stand-in MFT (mlxfwmanager, flint) for molecule: no ConnectX cards in a container. Replays a
recorded-format `mlxfwmanager --query` of an HGX node's HCAs, answers `flint -d DEV query`,
`flint -d DEV --linkx --downstream_device_ids 1 query` (one port has a copper cable without
firmware) and `flint -d DEV -i IMAGE -y burn`, which checks the image's PSID against the card
like the real tool and records the burned version so later queries report it."""
import json
import re
import sys
from pathlib import Path

FIXTURE = Path("/usr/share/standin-mft/mlxfwmanager-query.txt")
STATE = Path("/var/lib/standin-mft/burned.json")
# LinkX optics per HCA; the ConnectX-6 Dx port has a DAC (no firmware).
TRANSCEIVERS = {"0000:1a:00.0": "47.171.0000", "0000:40:00.0": "47.171.0000"}


def burned() -> dict:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def devices() -> list[tuple[str, str, str]]:
    """(pci, psid, fw) per device, with burned versions applied."""
    text = FIXTURE.read_text()
    out = []
    for block in text.split("Device #")[1:]:
        pci = re.search(r"PCI Device Name:\s+(\S+)", block)[1]
        psid = re.search(r"PSID:\s+(\S+)", block)[1]
        fw = re.search(r"^\s+FW\s+(\S+)", block, re.M)[1]
        out.append((pci, psid, burned().get(pci, fw)))
    return out


def mlxfwmanager(argv: list[str]) -> int:
    if argv != ["--query"]:
        print(f"-E- mlxfwmanager (stand-in): unsupported arguments {argv}", file=sys.stderr)
        return 2
    if Path("/var/lib/standin-mft/no-devices").exists():
        # What MFT says on a host whose HCAs are gone (or never were).
        print("-E- No devices found or specified, mst might be stopped, run 'mst start' to load MST modules")
        return 1
    text = FIXTURE.read_text()
    for pci, version in burned().items():
        block_start = text.index(f"PCI Device Name:  {pci}")
        fw_at = text.index("     FW ", block_start)
        end = text.index("\n", fw_at)
        text = text[:fw_at] + f"     FW             {version:<15}N/A           " + text[end:]
    print(text, end="")
    return 0


def flint(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "-d":
        print("-E- flint (stand-in): usage: flint -d DEV [...] query|burn", file=sys.stderr)
        return 2
    dev = argv[1]
    match = [d for d in devices() if d[0] == dev]
    if not match:
        print(f"-E- Cannot open Device: {dev}. No such file or directory. MFE_CR_ERROR", file=sys.stderr)
        return 1
    _, psid, fw = match[0]
    if argv[2:] == ["--linkx", "--downstream_device_ids", "1", "query"]:
        if dev not in TRANSCEIVERS:
            print("-E- Cable is not supported for LinkX firmware query (no managed module on this port)", file=sys.stderr)
            return 1
        print(f"Image type:            FS4\nFW Version:            {TRANSCEIVERS[dev]}\n"
              "Description:           NVIDIA 400G OSFP SR4 transceiver\nPSID:                  MT_0000000883")
        return 0
    if argv[2:] == ["query"] or argv[2:] == ["q"]:
        print(f"Image type:            FS4\nFW Version:            {fw}\nPSID:                  {psid}\n"
              "Security Attributes:   secure-fw")
        return 0
    if len(argv) == 6 and argv[2] == "-i" and argv[4:] == ["-y", "burn"]:
        image = dict(line.split("=", 1) for line in Path(argv[3]).read_text().split())
        if image["PSID"] != psid:
            print(f"-E- PSID mismatch. The PSID on flash ({psid}) differs from the PSID in the image ({image['PSID']}).", file=sys.stderr)
            return 1
        state = burned()
        state[dev] = image["VERSION"]
        STATE.parent.mkdir(parents=True, exist_ok=True)
        STATE.write_text(json.dumps(state))
        print(f"    Current FW version on flash:  {fw}\n    New FW version:               {image['VERSION']}\n\n"
              "Burning FW image without signatures - OK\nRestoring signature                     - OK")
        return 0
    print(f"-E- flint (stand-in): unsupported arguments {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit({"mlxfwmanager": mlxfwmanager, "flint": flint}[Path(sys.argv[0]).name](sys.argv[1:]))
