"""The stand-in apt repository builder (scripts/molecule/standin_repo.py): a signed repository
apt accepts, rebuilt only when specs change, and clear errors for bad specs."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import machine

REPO = Path(__file__).resolve().parents[3]


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "standin_repo", REPO / "scripts" / "molecule" / "standin_repo.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["standin_repo"] = module
    spec.loader.exec_module(module)
    return module


standin = _builder()
@pytest.fixture
def repo_tools() -> None:
    machine.require_tools(["dpkg-deb", "dpkg-scanpackages", "gpg", "gpgv"],
                          "scripts/deps/30-molecule.list")


needs_tools = pytest.mark.usefixtures("repo_tools")

SPEC = """
repository: {suite: bookworm, component: stable}
x-tool: &tool
  /usr/bin/demo-tool: {content: "#!/bin/sh\\necho demo\\n", mode: "0755"}
packages:
  - name: demo-ce
    version: "5:1.2.3-1~debian.12~bookworm"
    depends: [demo-cli]
    files: *tool
    conffiles: []
    systemd_units:
      demo.service: {enable: true, content: "[Service]\\nExecStart=/bin/true\\n"}
  - name: demo-cli
    version: 1.0-1
    architecture: all
    files:
      /etc/demo.conf: "key=value\\n"
      /usr/share/demo/fixture.txt: {source: fixture.txt}
    conffiles: [/etc/demo.conf]
"""


def _spec_dir(tmp_path: Path, text: str = SPEC) -> Path:
    d = tmp_path / "spec"
    d.mkdir(exist_ok=True)
    (d / "demo.yml").write_text(text)
    (d / "fixture.txt").write_text("GPU 0: NVIDIA H100 80GB HBM3\n")
    return d


@needs_tools
def test_builds_a_signed_flat_and_dists_repository(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    assert standin.build_repo([_spec_dir(tmp_path)], out) is True
    packages = (out / "Packages").read_text()
    assert "Package: demo-ce\nVersion: 5:1.2.3-1~debian.12~bookworm" in packages
    assert "Filename: pool/stable/demo-ce_1.2.3-1~debian.12~bookworm_amd64.deb" in packages
    assert (out / "dists/bookworm/stable/binary-amd64/Packages").read_text() == packages
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring),
                    str(out / standin.KEY_NAME)], check=True)
    for release_dir, index in ((out, " Packages\n"),
                               (out / "dists/bookworm", " stable/binary-amd64/Packages\n")):
        subprocess.run(["gpgv", "--keyring", str(keyring), str(release_dir / "InRelease")],
                       check=True, capture_output=True)
        assert index in (release_dir / "Release").read_text()
    deb = out / "pool/stable/demo-cli_1.0-1_all.deb"
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    assert "./usr/share/demo/fixture.txt" in listing
    control = subprocess.run(["dpkg-deb", "-I", str(out / "pool/stable/demo-ce_1.2.3-1~debian"
                                                    ".12~bookworm_amd64.deb"), "postinst"],
                             capture_output=True, text=True, check=True).stdout
    assert "systemctl enable --now demo.service" in control
    # the published fingerprint is the signing key's (roles check vendor keys by fingerprint)
    shown = subprocess.run(["gpg", "--show-keys", "--with-colons", str(out / standin.KEY_NAME)],
                           capture_output=True, text=True, check=True).stdout
    fprs = [line.split(":")[9] for line in shown.splitlines() if line.startswith("fpr:")]
    assert (out / standin.FINGERPRINT_NAME).read_text().strip() == fprs[0]
    assert len(fprs[0]) == 40


@needs_tools
def test_unchanged_specs_are_not_rebuilt(tmp_path: Path) -> None:
    spec, out = _spec_dir(tmp_path), tmp_path / "repo"
    assert standin.build_repo([spec], out) is True
    assert standin.build_repo([spec], out) is False
    (spec / "fixture.txt").write_text("changed\n")
    assert standin.build_repo([spec], out) is True


def test_refuses_to_overwrite_a_foreign_folder(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "data.txt").write_text("keep me")
    with pytest.raises(standin.SpecError, match="is not a stand-in repository"):
        standin.build_repo([_spec_dir(tmp_path)], out)
    assert (out / "data.txt").read_text() == "keep me"


@pytest.mark.parametrize(("text", "message"), [
    ("packages: [{name: a}]", r"packages\[0\]\.version is required"),
    ("packages: {}", "expected a mapping with a 'packages:' list"),
    ("pakages: []\npackages: []", "unknown top-level keys"),
    ("packages: [{name: a, version: '1', colour: red}]", "unknown keys"),
    ("packages: [{name: a, version: '1', files: {rel/path: x}}]", "path must be absolute"),
    ("packages: [{name: a, version: '1', files: {/x: {mode: '0644'}}}]", "exactly one of"),
    ("packages: [{name: a, version: '1', files: {/x: {content: y, mode: rwx}}}]",
     "not an octal mode"),
    ("packages: [{name: a, version: '1', files: {/x: {source: nope.txt}}}]", "not found"),
    ("packages: [{name: a, version: '1', files: {/x: {content: y, owner: z}}}]",
     "unknown keys"),
    ("packages: [{name: a, version: '1', files: {/x: 3}}]", "must be a string"),
    ("packages: [{name: a, version: '1', files: [x]}]", "must be a mapping path"),
    ("packages: [{name: a, version: '1', depends: 3}]", "must be a string or a list"),
    ("packages: [{name: a, version: '1', conffiles: [/etc/x]}]", "not one of the package"),
    ("packages: [{name: a, version: '1', systemd_units: {x.service: {enable: true}}}]",
     "needs the unit text"),
    ("packages: [{name: a, version: '1', systemd_units: [x]}]", "must be a mapping"),
    ("packages: [{name: a, version: '1', maintainer_scripts: {postinstall: x}}]",
     "maintainer_scripts"),
    ("packages: [a]", r"packages\[0\] must be a mapping"),
    ("packages: [{name: a, version: '1'}, {name: a, version: '1'}]", "is also defined"),
    ("packages: [\n", "not valid YAML"),
])
def test_bad_specs_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    spec = _spec_dir(tmp_path, text)
    with pytest.raises(standin.SpecError, match=message) as err:
        standin.load_specs([spec])
    assert str(spec / "demo.yml") in str(err.value)


def test_missing_or_empty_spec_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(standin.SpecError, match="spec folder not found"):
        standin.load_specs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(standin.SpecError, match=r"no \*\.yml spec files"):
        standin.load_specs([tmp_path / "empty"])


def test_command_line_reports_spec_errors_with_exit_2(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec_dir(tmp_path, "packages: [{name: a}]")
    assert standin.main([str(spec), str(tmp_path / "out")]) == 2
    assert "version is required" in capsys.readouterr().err
