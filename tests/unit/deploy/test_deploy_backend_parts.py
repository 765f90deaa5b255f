"""Pieces of the embedded backend that need no network: settings, SSH keys, hints, failure
reasons, the served image (sha256 check, qcow2 conversion, cache) and the build helpers."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from provisioner.deploy.embedded.artifacts import prepare_image
from provisioner.deploy.embedded.backend import authorized_keys, failure_reason, hint_args
from provisioner.deploy.embedded.settings import embedded_settings, state_dir
from provisioner.deploy.images.cache import build_slot, mark_done, recipe_key
from provisioner.deploy.images.commands import require_tools, run
from provisioner.exceptions import DeployError, InputError, InventoryError, NotReady
from provisioner.inventory.loader import load_site
from provisioner.inventory.spec import ImageSettings, RootDiskHint
from tests.support import machine

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForUnitTests unit@test"


def site(tmp: Path, settings: str) -> Path:
    (tmp / "site.yml").write_text(
        f"""\
site: unit
settings:
{settings}
networks:
  provisioning: {{cidr: 10.10.0.0/24, gateway: 10.10.0.1}}
credentials:
  c: {{username: u, password: {{env: UNIT_UNUSED}}}}
profiles:
  p: {{provisioning_nic: {{rule: first-onboard-up}}}}
racks:
  - name: r1
    index: 1
    defaults: {{profile: p, bmc: {{vendor: generic, credentials: c, address: 10.11.0.10}}}}
    hosts: [{{u: 1, name: h1}}]
"""
    )
    return tmp / "site.yml"


def test_missing_embedded_settings(tmp_path: Path) -> None:
    s = load_site(site(tmp_path, "  deploy_backend: embedded"))
    with pytest.raises(InventoryError, match=r"\[settings.embedded\].*needs settings.embedded"):
        embedded_settings(s)


def test_embedded_settings_defaults_and_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = load_site(site(tmp_path, "  embedded: {interface: eno1, server_address: 10.10.0.3}"))
    e = embedded_settings(s)
    assert e.public_http() == "http://10.10.0.3:8080"
    assert e.public_http(9000) == "http://10.10.0.3:9000"
    assert e.bind_address == "10.10.0.3"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    assert state_dir(s, e) == tmp_path / "state" / "unit-embedded"
    s2 = load_site(
        site(tmp_path, "  embedded: {interface: eno1, server_address: 10.10.0.3, log_dir: logs}")
    )
    assert state_dir(s2, embedded_settings(s2)) == tmp_path / "logs"


def test_authorized_keys_from_text_files_or_private_key(tmp_path: Path) -> None:
    (tmp_path / "team.pub").write_text(f"{KEY}\n\n{KEY}-2\n")
    s = load_site(site(tmp_path, f'  ssh_authorized_keys: ["{KEY}", team.pub]'))
    assert authorized_keys(s) == (KEY, KEY, f"{KEY}-2")
    (tmp_path / "id").write_text("private")
    (tmp_path / "id.pub").write_text(KEY + "\n")
    s = load_site(site(tmp_path, "  ssh_private_key: id"))
    assert authorized_keys(s) == (KEY,)
    s = load_site(site(tmp_path, "  ssh_authorized_keys: [missing.pub]"))
    with pytest.raises(InventoryError, match="neither an SSH public key nor a readable file"):
        authorized_keys(s)


def test_hint_args_and_failure_reason() -> None:
    assert hint_args(None) == ""
    assert (
        hint_args(RootDiskHint(serial="A B", size_gb_min=400))
        == "--serial 'A B' --min-gb 400.0"
    )
    assert failure_reason("deploy: x\ndeploy: FAILED: sha256 mismatch\n") == "sha256 mismatch"
    assert failure_reason("\n installer crashed \n") == "installer crashed"
    assert failure_reason("") == "the host reported a failure without a log"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_image_is_verified_before_use(tmp_path: Path, cache: Path) -> None:
    img = tmp_path / "os.raw"
    img.write_bytes(b"\x55" * 4096)
    good = hashlib.sha256(img.read_bytes()).hexdigest()
    with pytest.raises(InputError, match="sha256 is required"):
        prepare_image(ImageSettings(url=str(img)))
    with pytest.raises(DeployError, match=r"has sha256 .* the site file says 00"):
        prepare_image(ImageSettings(url=str(img), sha256="00" * 32))
    assert not list((cache / "served-images").glob("*/disk.raw"))  # nothing half-made kept
    with pytest.raises(InputError, match="does not exist"):
        prepare_image(ImageSettings(url=str(tmp_path / "nope.raw"), sha256=good))
    served = prepare_image(ImageSettings(url=f"file://{img}", sha256=good.upper()))
    assert served.sha256 == good and served.size_bytes == 4096 and served.root_partition is None
    img.unlink()  # the second use comes from the cache
    assert prepare_image(ImageSettings(url=str(img), sha256=good)).path == served.path


def test_qcow2_is_converted_to_raw(tmp_path: Path, cache: Path) -> None:
    machine.require_tools(["qemu-img"], "scripts/deps/20-lab.list")
    raw = tmp_path / "src.raw"
    raw.write_bytes(b"\x00" * 65536 + b"root" * 1024)
    q = tmp_path / "os.qcow2"
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(q)], check=True)
    served = prepare_image(
        ImageSettings(url=str(q), sha256=hashlib.sha256(q.read_bytes()).hexdigest(), format="qcow2")
    )
    assert served.path.read_bytes() == raw.read_bytes()
    assert served.sha256 == hashlib.sha256(raw.read_bytes()).hexdigest()


def test_http_image_download_errors(cache: Path) -> None:
    with pytest.raises(DeployError, match="cannot download the OS image"):
        prepare_image(ImageSettings(url="http://127.0.0.1:9/os.raw", sha256="00" * 32))


def test_build_slot_discards_failed_builds(cache: Path) -> None:
    key = recipe_key({"a": 1})
    assert key == recipe_key({"a": 1}) != recipe_key({"a": 2})
    with pytest.raises(RuntimeError), build_slot("t", key) as (out, done):
        assert not done
        (out / "half").write_text("x")
        raise RuntimeError("boom")
    assert not (cache / "t" / key).exists()
    with build_slot("t", key) as (out, done):
        mark_done(out, {"x": 1})
    with build_slot("t", key) as (out, done):
        assert done


def test_command_helpers() -> None:
    with pytest.raises(NotReady, match="missing tools: no-such-tool-xyz"):
        require_tools("sh", "no-such-tool-xyz")
    with pytest.raises(NotReady, match="not installed"):
        run(["no-such-tool-xyz"], what="testing")
    with pytest.raises(DeployError, match=r"testing failed \(exit 3\)[\s\S]*last words"):
        run(["sh", "-c", "echo last words; exit 3"], what="testing")
    with pytest.raises(DeployError, match="did not finish within"):
        run(["sleep", "5"], what="testing", timeout=0.2)
    assert run(["echo", "hi"], what="testing") == "hi\n"


def test_image_build_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from provisioner.deploy.images import __main__ as entry
    from provisioner.deploy.images.builder import BuiltImage, ImageRecipe

    seen: list[ImageRecipe] = []

    def fake(recipe: ImageRecipe) -> BuiltImage:
        from provisioner.events import Event, emit

        seen.append(recipe)
        emit(Event("stage", "debootstrap bookworm", data={"image": "lab", "step": 1, "steps": 5}))
        emit(Event("output", "I: Retrieving InRelease"))  # tool chatter stays off the terminal
        return BuiltImage(Path("/c/disk.qcow2"), "qcow2", "ab" * 32, 123, 2, "6.1.0-9")

    monkeypatch.setattr(entry, "build_lab_image", fake)
    assert entry.main(["--format", "qcow2"]) == 0
    assert seen[0].format == "qcow2"
    captured = capsys.readouterr()
    assert captured.err == "image: [1/5] debootstrap bookworm\n"  # the stages, on stderr
    out = json.loads(captured.out)
    assert out == {
        "url": "/c/disk.qcow2",
        "format": "qcow2",
        "sha256": "ab" * 32,
        "size_bytes": 123,
        "kernel": "6.1.0-9",
    }

    def broken(recipe: ImageRecipe) -> BuiltImage:
        raise NotReady("missing tools: debootstrap")

    monkeypatch.setattr(entry, "build_lab_image", broken)
    assert entry.main([]) == 5
    assert "missing tools: debootstrap" in capsys.readouterr().err
