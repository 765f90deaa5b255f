"""Build a signed apt repository of stand-in .deb packages from YAML specs.

The packages carry the real names and versions of vendor packages (NVIDIA driver, DCGM,
DOCA-OFED, ZFS...) that cannot be downloaded here, so a role's repository set-up, pinning,
holds, services and module configuration run for real under molecule. Hardware commands inside
them are small scripts that replay outputs recorded in the real formats. See
molecule/shared/README.md for the spec format.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

KEY_NAME = "standin-archive-keyring.asc"
# The key's fingerprint, so scenarios can run a role's fingerprint check against the
# throwaway key (molecule.yml: a lookup of this file under the built repository).
FINGERPRINT_NAME = "standin-archive-keyring.fpr"
STAMP = ".standin-stamp"
MAINTAINER_SCRIPTS = ("preinst", "postinst", "prerm", "postrm")
CONTROL_LISTS = ("depends", "pre_depends", "recommends", "provides", "conflicts", "replaces",
                 "breaks")


class SpecError(Exception):
    """A stand-in spec is invalid; the message names the file and the key."""


@dataclass
class Package:
    """One stand-in package as read from a spec file."""

    spec_file: Path
    name: str
    version: str
    architecture: str
    description: str
    section: str
    control: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    scripts: dict[str, str] = field(default_factory=dict)
    conffiles: list[str] = field(default_factory=list)


@dataclass
class Layout:
    """Where packages go: a flat repository (``deb URL /``) or ``dists/SUITE/COMPONENT``."""

    suite: str | None = None
    component: str = "main"
    origin: str = "provisioner stand-in"
    label: str = "provisioner stand-in"


def _where(spec: Path, key: str) -> str:
    return f"{spec}: {key}"


def _as_list(value: Any, spec: Path, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SpecError(f"{_where(spec, key)} must be a string or a list of strings")


def _file_entry(spec: Path, pkg: str, path: str, entry: Any) -> tuple[bytes, int]:
    key = f"packages[{pkg}].files[{path}]"
    if not path.startswith("/"):
        raise SpecError(f"{_where(spec, key)}: path must be absolute (start with /)")
    if isinstance(entry, str):
        return entry.encode(), 0o644
    if not isinstance(entry, dict):
        raise SpecError(f"{_where(spec, key)} must be a string (content) or a mapping "
                        "with content/source and mode")
    unknown = set(entry) - {"content", "source", "mode"}
    if unknown:
        raise SpecError(f"{_where(spec, key)}: unknown keys {sorted(unknown)} "
                        "(allowed: content, source, mode)")
    if ("content" in entry) == ("source" in entry):
        raise SpecError(f"{_where(spec, key)}: give exactly one of content or source")
    if "source" in entry:
        src = (spec.parent / str(entry["source"])).resolve()
        if not src.is_file():
            raise SpecError(f"{_where(spec, key)}: source file {src} not found "
                            "(paths are relative to the spec file)")
        data = src.read_bytes()
    else:
        data = str(entry["content"]).encode()
    mode_raw = entry.get("mode", "0644")
    try:
        mode = int(str(mode_raw), 8)
    except ValueError as exc:
        raise SpecError(f"{_where(spec, key)}.mode: '{mode_raw}' is not an octal mode "
                        "such as \"0755\" (quote it in YAML)") from exc
    return data, mode


def _unit_postinst(units: dict[str, bool]) -> str:
    """Shell that enables (and starts) units the way debhelper's dh_installsystemd does."""
    lines = ["if [ -d /run/systemd/system ]; then", "  systemctl --system daemon-reload || true"]
    for unit, enable in units.items():
        if enable:
            lines.append(f"  systemctl enable --now {unit} || true")
    lines.append("fi")
    return "\n".join(lines) + "\n"


def _parse_package(spec: Path, raw: Any, index: int) -> Package:
    if not isinstance(raw, dict):
        raise SpecError(f"{_where(spec, f'packages[{index}]')} must be a mapping")
    for required in ("name", "version"):
        if not raw.get(required):
            raise SpecError(f"{_where(spec, f'packages[{index}].{required}')} is required")
    name, version = str(raw["name"]), str(raw["version"])
    known = {"name", "version", "architecture", "description", "section", "files",
             "maintainer_scripts", "systemd_units", "conffiles", *CONTROL_LISTS}
    unknown = set(raw) - known
    if unknown:
        raise SpecError(f"{_where(spec, f'packages[{name}]')}: unknown keys {sorted(unknown)} "
                        f"(allowed: {', '.join(sorted(known))})")
    pkg = Package(
        spec_file=spec,
        name=name,
        version=version,
        architecture=str(raw.get("architecture", "amd64")),
        description=str(raw.get("description", f"{name} (provisioner test stand-in)")),
        section=str(raw.get("section", "misc")),
    )
    for key in CONTROL_LISTS:
        values = _as_list(raw.get(key), spec, f"packages[{name}].{key}")
        if values:
            pkg.control[key.replace("_", "-").title()] = ", ".join(values)
    files = raw.get("files") or {}
    if not isinstance(files, dict):
        raise SpecError(f"{_where(spec, f'packages[{name}].files')} must be a mapping path: entry")
    for path, entry in files.items():
        pkg.files[str(path)] = _file_entry(spec, name, str(path), entry)
    pkg.conffiles = _as_list(raw.get("conffiles"), spec, f"packages[{name}].conffiles")
    for conf in pkg.conffiles:
        if conf not in pkg.files:
            raise SpecError(f"{_where(spec, f'packages[{name}].conffiles')}: {conf} is not "
                            "one of the package's files")
    units = raw.get("systemd_units") or {}
    if not isinstance(units, dict):
        raise SpecError(f"{_where(spec, f'packages[{name}].systemd_units')} must be a mapping "
                        "unit-name: content (or {content, enable})")
    enable: dict[str, bool] = {}
    for unit, entry in units.items():
        content, on = entry, False
        if isinstance(entry, dict):
            content, on = entry.get("content"), bool(entry.get("enable", False))
        if not isinstance(content, str):
            raise SpecError(f"{_where(spec, f'packages[{name}].systemd_units[{unit}]')} needs "
                            "the unit text (a string, or content: under a mapping)")
        pkg.files[f"/lib/systemd/system/{unit}"] = (content.encode(), 0o644)
        enable[str(unit)] = on
    scripts = raw.get("maintainer_scripts") or {}
    if not isinstance(scripts, dict) or set(scripts) - set(MAINTAINER_SCRIPTS):
        raise SpecError(f"{_where(spec, f'packages[{name}].maintainer_scripts')} must map "
                        f"{', '.join(MAINTAINER_SCRIPTS)} to shell text")
    pkg.scripts = {k: str(v) for k, v in scripts.items()}
    if any(enable.values()):
        body = pkg.scripts.get("postinst", "#!/bin/sh\nset -e\n")
        pkg.scripts["postinst"] = body.rstrip("\n") + "\n" + _unit_postinst(enable)
    return pkg


def load_specs(spec_dirs: list[Path]) -> tuple[list[Package], Layout]:
    """Read every *.yml/*.yaml in the spec folders (in name order)."""
    packages: list[Package] = []
    layout = Layout()
    seen: dict[tuple[str, str], Path] = {}
    for spec_dir in spec_dirs:
        if not spec_dir.is_dir():
            raise SpecError(f"{spec_dir}: spec folder not found")
        specs = sorted([*spec_dir.glob("*.yml"), *spec_dir.glob("*.yaml")])
        if not specs:
            raise SpecError(f"{spec_dir}: no *.yml spec files in it")
        for spec in specs:
            try:
                doc = yaml.safe_load(spec.read_text())
            except yaml.YAMLError as exc:
                raise SpecError(f"{spec}: not valid YAML: {exc}") from exc
            if not isinstance(doc, dict) or not isinstance(doc.get("packages"), list):
                raise SpecError(f"{spec}: expected a mapping with a 'packages:' list")
            unknown = {k for k in doc if k not in ("packages", "repository")
                       and not str(k).startswith("x-")}
            if unknown:
                raise SpecError(f"{spec}: unknown top-level keys {sorted(unknown)} (allowed: "
                                "packages, repository, and x-* for YAML anchors)")
            repo = doc.get("repository") or {}
            if repo:
                layout = Layout(
                    suite=repo.get("suite", layout.suite),
                    component=repo.get("component", layout.component),
                    origin=repo.get("origin", layout.origin),
                    label=repo.get("label", layout.label),
                )
            for i, raw in enumerate(doc["packages"]):
                pkg = _parse_package(spec, raw, i)
                key = (pkg.name, pkg.version)
                if key in seen:
                    raise SpecError(f"{spec}: package {pkg.name} {pkg.version} is also "
                                    f"defined in {seen[key]}")
                seen[key] = spec
                packages.append(pkg)
    return packages, layout


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(cmd, check=True, capture_output=True, **kwargs)
    except FileNotFoundError:
        sys.exit(f"build-standin-repo: {cmd[0]} not found: run scripts/install-deps")
    except subprocess.CalledProcessError as exc:
        sys.exit(f"build-standin-repo: {' '.join(cmd)} failed:\n{exc.stderr.decode()}")


def build_deb(pkg: Package, out: Path, work: Path) -> Path:
    """Assemble one package tree and run dpkg-deb on it."""
    root = work / f"{pkg.name}_{pkg.version}"
    (root / "DEBIAN").mkdir(parents=True)
    for path, (data, mode) in pkg.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)
    control = {
        "Package": pkg.name,
        "Version": pkg.version,
        "Architecture": pkg.architecture,
        "Maintainer": "provisioner tests <standin@invalid>",
        "Section": pkg.section,
        "Priority": "optional",
        **pkg.control,
        "Description": pkg.description + "\n Stand-in built for tests: not the vendor's package.",
    }
    (root / "DEBIAN" / "control").write_text(
        "".join(f"{k}: {v}\n" for k, v in control.items()))
    for script, body in pkg.scripts.items():
        target = root / "DEBIAN" / script
        target.write_text(body if body.startswith("#!") else "#!/bin/sh\nset -e\n" + body)
        target.chmod(0o755)
    if pkg.conffiles:
        (root / "DEBIAN" / "conffiles").write_text("\n".join(pkg.conffiles) + "\n")
    deb = out / f"{pkg.name}_{pkg.version.split(':')[-1]}_{pkg.architecture}.deb"
    _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(deb)])
    return deb


def _release(dir_: Path, files: list[Path], layout: Layout, arches: list[str]) -> str:
    fields = {
        "Origin": layout.origin,
        "Label": layout.label,
        "Date": datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S UTC"),
        "Architectures": " ".join(arches),
    }
    if layout.suite:
        fields["Suite"] = layout.suite
        fields["Codename"] = layout.suite
        fields["Components"] = layout.component
    text = "".join(f"{k}: {v}\n" for k, v in fields.items())
    for title, algo in (("MD5Sum", "md5"), ("SHA256", "sha256")):
        text += f"{title}:\n"
        for f in files:
            data = f.read_bytes()
            digest = hashlib.new(algo, data).hexdigest()
            text += f" {digest} {len(data):>16} {f.relative_to(dir_).as_posix()}\n"
    return text


def _sign(releases: list[Path], out_dir: Path) -> None:
    """Sign the Release files with a throwaway key; publish the public half beside them."""
    with tempfile.TemporaryDirectory(prefix="standin-gpg.") as home:
        env = {**os.environ, "GNUPGHOME": home}
        gpg = ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
        _run([*gpg, "--quick-gen-key", "provisioner stand-in repository <standin@invalid>",
              "ed25519", "sign", "never"], env=env)
        key = _run([*gpg, "--armor", "--export"], env=env).stdout
        (out_dir / KEY_NAME).write_bytes(key)
        listing = _run([*gpg, "--with-colons", "--list-keys"], env=env).stdout
        fprs = [line.split(":")[9] for line in listing.decode().splitlines()
                if line.startswith("fpr:")]
        (out_dir / FINGERPRINT_NAME).write_text(f"{fprs[0]}\n")
        for release in releases:
            _run([*gpg, "--yes", "--clearsign", "-o", str(release.parent / "InRelease"),
                  str(release)], env=env)
            _run([*gpg, "--yes", "-abs", "-o", str(release.parent / "Release.gpg"),
                  str(release)], env=env)


def _fingerprint(spec_dirs: list[Path]) -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for d in spec_dirs:
        for f in sorted(p for p in d.rglob("*") if p.is_file()):
            digest.update(f.as_posix().encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


def build_repo(spec_dirs: list[Path], out_dir: Path, *, force: bool = False) -> bool:
    """Build (or reuse, when the specs are unchanged) the repository; True when built."""
    stamp = _fingerprint(spec_dirs)
    if not force and (out_dir / STAMP).is_file() and (out_dir / STAMP).read_text() == stamp:
        return False
    packages, layout = load_specs(spec_dirs)
    if out_dir.exists():
        if any(out_dir.iterdir()) and not (out_dir / STAMP).is_file():
            raise SpecError(f"{out_dir}: exists, is not empty and is not a stand-in repository: "
                            "give an empty or new folder")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    arches = sorted({p.architecture for p in packages if p.architecture != "all"} or {"amd64"})
    # One pool, two indexes over it: a flat one at the root (`deb URL /`, like NVIDIA's
    # repositories) and, when a spec names a suite, dists/SUITE/COMPONENT (`deb URL SUITE
    # COMPONENT`, like Docker's). Filenames are relative to the root either way.
    pool = out_dir / "pool" / layout.component
    pool.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="standin-build.") as work:
        for pkg in packages:
            build_deb(pkg, pool, Path(work))
    scan = _run(["dpkg-scanpackages", "--multiversion", os.path.relpath(pool, out_dir),
                 "/dev/null"], cwd=out_dir).stdout
    targets = [(out_dir, out_dir, Layout(origin=layout.origin, label=layout.label))]
    if layout.suite:
        suite_dir = out_dir / "dists" / layout.suite
        targets.append((suite_dir, suite_dir / layout.component / f"binary-{arches[0]}", layout))
    releases = []
    for release_dir, index_dir, target_layout in targets:
        index_dir.mkdir(parents=True, exist_ok=True)
        (index_dir / "Packages").write_bytes(scan)
        (index_dir / "Packages.gz").write_bytes(gzip.compress(scan, mtime=0))
        indexes = [index_dir / "Packages", index_dir / "Packages.gz"]
        (release_dir / "Release").write_text(
            _release(release_dir, indexes, target_layout, arches))
        releases.append(release_dir / "Release")
    _sign(releases, out_dir)
    (out_dir / STAMP).write_text(stamp)
    return True


def main(argv: list[str] | None = None) -> int:
    """Command line: build-standin-repo SPEC_DIR [SPEC_DIR...] OUT_DIR."""
    parser = argparse.ArgumentParser(
        prog="build-standin-repo",
        description="Build a signed apt repository of stand-in packages from YAML specs.")
    parser.add_argument("spec_dirs", nargs="+", type=Path, metavar="SPEC_DIR")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    parser.add_argument("--force", action="store_true", help="rebuild even if unchanged")
    args = parser.parse_args(argv)
    try:
        built = build_repo([d.resolve() for d in args.spec_dirs], args.out_dir.resolve(),
                           force=args.force)
    except SpecError as exc:
        print(f"build-standin-repo: error: {exc}", file=sys.stderr)
        return 2
    print(f"build-standin-repo: {args.out_dir} {'built' if built else 'unchanged'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
