#!/usr/bin/python3
"""Stand-in zpool/zfs for molecule (ZFS cannot run in a container, and zfsutils is not in the
registry here). Pools and datasets live in a JSON state file; outputs follow the real formats
of OpenZFS 2.1 (`zpool list -H`, `zpool status`, `zpool import`, `zfs get -H`), and errors the
real tools give (foreign filesystem, pool in use by another system) are given here too, so the
role's real logic is what the scenario exercises. Invoked as zpool, zfs or standin-zfs."""
import json
import os
import random
import sys
import time
from pathlib import Path

STATE = Path("/var/lib/standin-zfs/state.json")
LOG = Path("/var/lib/standin-zfs/commands.log")
BY_ID = Path("/dev/disk/by-id")
LAYOUT = Path("/var/lib/standin-disks/layout")
FIXTURES = Path("/usr/share/standin-disks")
DEFAULTS = {"compression": "off", "atime": "on", "xattr": "on", "acltype": "off",
            "recordsize": "128K", "mountpoint": None}


def load() -> dict:
    if STATE.exists():
        return json.loads(STATE.read_text())
    return {"hostid": "%08x" % random.getrandbits(32), "pools": {}}


def save(state: dict) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(state, indent=1, sort_keys=True))


def fail(msg: str, rc: int = 1) -> int:
    print(msg, file=sys.stderr)
    return rc


def foreign_fs(kernel_name: str) -> str | None:
    """The filesystem type the fixture shows on a drive or its partitions, if any."""
    layout = LAYOUT.read_text().strip() if LAYOUT.exists() else "hgx-8nvme"
    tree = json.loads((FIXTURES / f"lsblk.{layout}.json").read_text())
    for disk in tree["blockdevices"]:
        if disk["name"] == kernel_name:
            stack = [disk]
            while stack:
                node = stack.pop()
                if node.get("fstype"):
                    return node["fstype"]
                stack.extend(node.get("children") or [])
    return None


def imported(state: dict) -> dict:
    return {n: p for n, p in state["pools"].items() if p["imported"]}


def dataset_pool(state: dict, name: str) -> dict | None:
    pool = state["pools"].get(name.split("/")[0])
    return pool if pool and pool["imported"] else None


def get_prop(pool: dict, name: str, prop: str) -> str:
    ds = pool["datasets"][name]
    if prop in ds:
        return ds[prop]
    if "/" in name:
        parent = name.rsplit("/", 1)[0]
        if prop == "mountpoint":
            base = get_prop(pool, parent, "mountpoint")
            return "none" if base == "none" else f"{base}/{name.rsplit('/', 1)[1]}"
        return get_prop(pool, parent, prop)
    value = DEFAULTS[prop]
    return value if value is not None else f"/{name}"


def vdev_lines(pool: dict, indent: str, counters: bool) -> list[str]:
    tail = "     0     0     0" if counters else ""
    rows = [(pool["name"], ""), (f"{pool['level']}-0", "  ")]
    rows += [(dev, "    ") for dev in pool["devices"]]
    return [f"{indent}{pad}{name:<{50 - len(pad)}} ONLINE  {tail}".rstrip() for name, pad in rows]


def zpool(argv: list[str]) -> int:
    state = load()
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "list":
        names = [a for a in args if not a.startswith("-") and a not in ("name",)]
        pools = imported(state)
        for n in names:
            if n not in pools:
                return fail(f"cannot open '{n}': no such pool")
        for n, p in sorted(pools.items()):
            if names and n not in names:
                continue
            if "-H" in args:
                print(n)
            else:
                print("NAME   SIZE  ALLOC   FREE  CKPOINT  EXPANDSZ   FRAG    CAP  DEDUP    HEALTH  ALTROOT")
                print(f"{n:<6} 27.9T  1.45M  27.9T        -         -     0%     0%  1.00x    ONLINE  -")
        return 0
    if cmd == "status":
        pools = imported(state)
        names = args or sorted(pools)
        if not pools:
            print("no pools available")
            return 0
        for n in names:
            if n not in pools:
                return fail(f"cannot open '{n}': no such pool")
            print(f"  pool: {n}\n state: ONLINE\nconfig:\n")
            print(f"\t{'NAME':<50} STATE     READ WRITE CKSUM")
            print("\n".join(vdev_lines(pools[n], "\t", True)))
            print("\nerrors: No known data errors")
        return 0
    if cmd == "import":
        force = "-f" in args
        rest = [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] != "-d"]
        candidates = {n: p for n, p in state["pools"].items() if not p["imported"]}
        if not rest:
            if not candidates:
                return fail("no pools available to import")
            for n, p in sorted(candidates.items()):
                print(f"   pool: {n}\n     id: {p['guid']}\n  state: ONLINE")
                if p["last_hostid"] != state["hostid"]:
                    print(" status: The pool was last accessed by another system.")
                    print(" action: The pool can be imported using its name or numeric identifier and\n\tthe '-f' flag.")
                    print("   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY")
                else:
                    print(" action: The pool can be imported using its name or numeric identifier.")
                print(" config:\n")
                print("\n".join(vdev_lines(p, "\t", False)))
                print()
            return 0
        target = rest[0]
        match = [p for n, p in candidates.items() if target in (n, str(p["guid"]))]
        if not match:
            return fail(f"cannot import '{target}': no such pool available")
        pool = match[0]
        if pool["last_hostid"] != state["hostid"] and not force:
            return fail(
                f"cannot import '{pool['name']}': pool was previously in use from another system.\n"
                f"Last accessed by {pool['last_host']} (hostid={pool['last_hostid']}) at "
                f"{time.ctime(pool['created'])}\n"
                "The pool can be imported, use 'zpool import -f' to import the pool.")
        pool.update(imported=True, last_hostid=state["hostid"], last_host=os.uname().nodename)
        save(state)
        log(["zpool", *argv])
        return 0
    if cmd == "create":
        force, options, props, mount = False, {}, {}, None
        i = 0
        while i < len(args) and args[i].startswith("-"):
            flag = args[i]
            if flag == "-f":
                force = True
            elif flag in ("-o", "-O", "-m"):
                i += 1
                if flag == "-m":
                    mount = args[i]
                else:
                    k, v = args[i].split("=", 1)
                    (options if flag == "-o" else props)[k] = v
            i += 1
        name, level, devices = args[i], args[i + 1], args[i + 2:]
        if name in state["pools"] and state["pools"][name]["imported"]:
            return fail(f"cannot create '{name}': pool already exists")
        if level not in ("raidz1", "raidz2", "raidz3", "raidz", "mirror"):
            return fail(f"invalid vdev specification: unknown type {level}")
        problems = []
        for dev in devices:
            path = Path(dev)
            if not path.is_symlink():
                return fail(f"cannot open '{dev}': no such device in /dev\nmust be a full path or shorthand device name")
            kname = os.readlink(path).rsplit("/", 1)[-1]
            for other in state["pools"].values():
                if dev in other["devices"]:
                    problems.append(f"{dev} is part of {'active' if other['imported'] else 'exported'} pool '{other['name']}'")
            fs = foreign_fs(kname)
            if fs:
                problems.append(f"{dev}-part1 contains a filesystem of type '{fs}'")
        if problems and not force:
            return fail("invalid vdev specification\nuse '-f' to override the following errors:\n" + "\n".join(problems))
        root = dict(props)
        root["mountpoint"] = mount or f"/{name}"
        state["pools"][name] = {
            "name": name, "guid": random.getrandbits(63), "level": "raidz1" if level == "raidz" else level,
            "devices": [d.rsplit("/", 1)[-1] for d in devices], "options": options,
            "imported": True, "last_hostid": state["hostid"], "last_host": os.uname().nodename,
            "created": int(time.time()), "datasets": {name: root},
        }
        save(state)
        log(["zpool", *argv])
        return 0
    return fail(f"zpool (stand-in): unsupported command: {' '.join(argv)}", 2)


def zfs(argv: list[str]) -> int:
    state = load()
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "list":
        names = [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] not in ("-o", "-t")]
        for n in names:
            pool = dataset_pool(state, n)
            if not pool or n not in pool["datasets"]:
                return fail(f"cannot open '{n}': dataset does not exist")
        for pool in imported(state).values():
            for ds in sorted(pool["datasets"]):
                if not names or any(ds == n or ("-r" in args and ds.startswith(n + "/")) for n in names):
                    print(ds)
        return 0
    if cmd == "create":
        props, i = {}, 0
        while args[i].startswith("-"):
            if args[i] == "-o":
                k, v = args[i + 1].split("=", 1)
                props[k] = v
                i += 1
            i += 1
        name = args[i]
        pool = dataset_pool(state, name)
        if not pool:
            return fail(f"cannot create '{name}': no such pool '{name.split('/')[0]}'")
        if name in pool["datasets"]:
            return fail(f"cannot create '{name}': dataset already exists")
        pool["datasets"][name] = props
        save(state)
        log(["zfs", *argv])
        return 0
    if cmd == "get":
        # zfs get -H -o name,property,value PROPS DATASET...
        rest = [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] != "-o"]
        props, names = rest[0].split(","), rest[1:]
        fields = args[args.index("-o") + 1].split(",") if "-o" in args else ["name", "property", "value"]
        for n in names:
            pool = dataset_pool(state, n)
            if not pool or n not in pool["datasets"]:
                return fail(f"cannot open '{n}': dataset does not exist")
            for prop in props:
                if prop not in DEFAULTS:
                    return fail(f"bad property list: invalid property '{prop}'", 2)
                row = {"name": n, "property": prop, "value": get_prop(pool, n, prop),
                       "source": "local" if prop in pool["datasets"][n] else "inherited"}
                print("\t".join(row[f] for f in fields))
        return 0
    if cmd == "set":
        (assignment, name) = args
        k, v = assignment.split("=", 1)
        pool = dataset_pool(state, name)
        if not pool or name not in pool["datasets"]:
            return fail(f"cannot open '{name}': dataset does not exist")
        pool["datasets"][name][k] = v
        save(state)
        log(["zfs", *argv])
        return 0
    return fail(f"zfs (stand-in): unsupported command: {' '.join(argv)}", 2)


def standin(argv: list[str]) -> int:
    """Test controls: `reimage` (new OS: new hostid, no pool imported), `wipe` (blank drives)."""
    state = load()
    if argv == ["reimage"]:
        state["hostid"] = "%08x" % random.getrandbits(32)
        for pool in state["pools"].values():
            pool["imported"] = False
    elif argv == ["wipe"]:
        state["pools"] = {}
    else:
        return fail("usage: standin-zfs reimage|wipe", 2)
    save(state)
    return 0


def log(argv: list[str]) -> None:
    with LOG.open("a") as f:
        f.write(" ".join(argv) + "\n")


if __name__ == "__main__":
    prog = Path(sys.argv[0]).name
    sys.exit({"zpool": zpool, "zfs": zfs, "standin-zfs": standin}[prog](sys.argv[1:]))
