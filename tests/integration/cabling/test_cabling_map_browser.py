"""The fabric map in a real headless Chromium (Debian's ``chromium``; scripts/deps/40-cabling.list).

An imported fabric (as-built of a simulated 4,088-GPU, 3-tier ibnetdiscover: no roles, no groups)
is drawn with the findings of validating a faulty copy against it. Chromium takes a screenshot
(kept under $PROVISIONER_ARTIFACTS when set) and dumps the DOM after the page's script ran: the
tiers are derived, every faulty device is inside the first screen, search finds a host and a
GUID, and a finding's link shows its cable.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from cabling.asbuilt import as_built
from cabling.diff import validate
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.model import Manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.report.fabricmap import render_map
from cabling.resolve import resolve
from cabling.simulate import build_clean, inject_faults, render_ibnetdiscover

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1600,1000"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not found: install the Debian package 'chromium' (scripts/install-deps)")


def _run(page: Path, tmp: Path, *args: str, fragment: str = "") -> str:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    profile.mkdir()
    cmd = [_chromium(), *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=4000", *args,
           page.as_uri() + fragment]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def fabric_map(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest, list[str]]:
    plan = plan_fat_tree(PlanSpec(hosts=511))
    imported = as_built(parse_ibnetdiscover(render_ibnetdiscover(plan, build_clean(plan)), "clean.txt"))
    assert not any(d.role or d.group for d in imported.devices)  # nothing but the topology to go on
    sim = inject_faults(plan, 1, seed=3)
    report = validate(imported, resolve(parse_ibnetdiscover(render_ibnetdiscover(plan, sim), "faulty.txt"),
                                        imported))
    assert report.findings
    page = tmp_path_factory.mktemp("map") / "fabric-map.html"
    page.write_text(render_map(imported, report), encoding="utf-8")
    switches = {d.name.casefold() for d in imported.devices if d.kind == "switch"}
    faulty = sorted({e.rpartition(":")[0] for f in report.findings for e in f.endpoints
                     if e.rpartition(":")[0].casefold() in switches})
    assert faulty
    return page, imported, faulty


def _attr(dom: str, name: str) -> str:
    m = re.search(rf'<body[^>]*\b{name}="([^"]*)"', dom)
    assert m, f"no {name} on <body>"
    return m.group(1)


def test_the_first_screen_shows_the_tiers_and_every_faulty_switch(fabric_map: tuple[Path, Manifest, list[str]], tmp_path: Path) -> None:
    page, _m, faulty = fabric_map
    shot_dir = Path(os.environ.get("PROVISIONER_ARTIFACTS") or tmp_path) / "cabling"
    shot_dir.mkdir(parents=True, exist_ok=True)
    shot = shot_dir / "fabric-map-4088-gpus.png"
    _run(page, tmp_path, f"--screenshot={shot}")
    width, height, red = _red_pixels(shot.read_bytes())
    assert (width, height) == (1600, 1000)
    assert red > 200, "no faulty device or cable is drawn red in the screenshot"
    dom = _run(page, tmp_path, "--dump-dom")
    assert _attr(dom, "data-ready") == "1"
    visible = set(_attr(dom, "data-visible-faults").split(","))
    assert set(faulty) <= visible, f"faulty switches off the first screen: {set(faulty) - visible}"
    tiers = re.findall(r'<text[^>]*class="tier"[^>]*>([^<]+)</text>', dom)
    assert sorted(tiers) == ["core", "hosts", "leaf", "spine"]
    groups = re.findall(r'<g class="grp[^"]*" data-group="\d+">', dom)
    assert 20 <= len(groups) <= 80  # units, not 831 boxes or one


def test_search_finds_a_host_and_a_guid(fabric_map: tuple[Path, Manifest, list[str]], tmp_path: Path) -> None:
    page, m, _faulty = fabric_map
    dom = _run(page, tmp_path, "--dump-dom", fragment="#q=gpu042")
    assert '<h3 id="found">gpu042</h3>' in dom and "8 cable(s)" in dom
    host = next(d for d in m.devices if d.name == "gpu317")
    guid = next(iter(host.hca_guids.values()))
    dom = _run(page, tmp_path, "--dump-dom", fragment=f"#q=0x{guid}")
    assert '<h3 id="found">gpu317</h3>' in dom


def test_a_finding_shows_its_cable(fabric_map: tuple[Path, Manifest, list[str]], tmp_path: Path) -> None:
    page, _m, _faulty = fabric_map
    dom = _run(page, tmp_path, "--dump-dom", fragment="#finding=1")
    assert re.search(r'<h3 id="cable">#1 \w+</h3>', dom)
    assert re.search(r'<line [^>]*class="hl', dom), "the finding's cable is not highlighted"
    assert '<tr class="sel">' in dom


def _red_pixels(png: bytes) -> tuple[int, int, int]:
    """Width, height and the count of fault-red pixels of an 8-bit RGB(A) PNG (no imaging library here)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    red = 0
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y < height * 0.75:  # the map, not the findings table under it
            for x in range(0, stride, channels * 2):
                r, g, bl = line[x], line[x + 1], line[x + 2]
                if r > 180 and g < 90 and bl < 90:
                    red += 1
        prev = line
    return width, height, red


def test_the_plan_with_roles_shows_its_faulty_switches_on_the_first_screen(tmp_path: Path) -> None:
    plan = plan_fat_tree(PlanSpec(hosts=511))
    sim = inject_faults(plan, 1, seed=11)
    report = validate(plan, resolve(parse_ibnetdiscover(render_ibnetdiscover(plan, sim), "f.txt"), plan))
    page = tmp_path / "plan-map.html"
    page.write_text(render_map(plan, report), encoding="utf-8")
    dom = _run(page, tmp_path, "--dump-dom")
    switches = {d.name for d in plan.devices if d.kind == "switch"}
    faulty = {e.rpartition(":")[0] for f in report.findings for e in f.endpoints} & switches
    assert faulty and faulty <= set(_attr(dom, "data-visible-faults").split(","))
    groups = re.findall(r"<text[^>]*>(su\d+|pod\d+) \((\d+)\)</text>", dom)
    assert ("su01", "32") in groups and ("su01", "8") in groups and ("pod1", "32") in groups
