"""The collector script run by real bash on this machine (no SSH): counters first, the wait,
the big sections after COLLECT, the lspci class filter, and the textfile it reads back on its
own stdin (header, bytes, atomic rename; nothing after the bytes is ever run)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from provisioner.health.collector import COLLECT, READY, collector_script, parse_sections
from provisioner.health.config import Expectations, HealthSettings

EXP = Expectations(gpus=8, settings=HealthSettings(counter_interval_s=0, dcgm_exporter=False))

# `lspci -vvv -nn -D` in its real layout (written): a GPU, its switch port, an uncore function
# and an NVMe drive; only the first two are something a check reads.
LSPCI_NN = """\
0000:17:01.0 PCI bridge [0604]: Broadcom / LSI PEX890xx PCIe Gen 5 Switch [1000:c030] (rev b0) (prog-if 00 [Normal decode])
\tPhysical Slot: 28
\tBus: primary=17, secondary=19, subordinate=19, sec-latency=0

0000:19:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:16c1]

0000:7e:0b.1 System peripheral [0880]: Intel Corporation Device [8086:3251]
\tSubsystem: Intel Corporation Device [8086:0000]

0000:c1:00.0 Non-Volatile memory controller [0108]: Samsung Electronics Co Ltd NVMe SSD Controller PM174X [144d:a826]
\tSubsystem: Samsung Electronics Co Ltd Device [144d:aa0a]
"""


def run(script: str, stdin_after: bytes = b"", path: Path | None = None) -> str:
    env = {"PATH": f"{path}:/usr/bin:/bin" if path else "/usr/bin:/bin", "LC_ALL": "C"}
    proc = subprocess.run(["bash", "-s"], input=script.encode() + stdin_after, env=env,
                          capture_output=True, timeout=120, check=False)
    return proc.stdout.decode(errors="replace")


def shim(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.txt").write_text(text)
    (folder / name).write_text(f"#!/bin/bash\nexec cat {folder / (name + '.txt')}\n")
    (folder / name).chmod(0o755)


def test_counters_come_before_the_wait_and_the_big_sections_after_collect(tmp_path: Path) -> None:
    out = run(collector_script(EXP))
    order = [ln.split()[1] for ln in out.splitlines() if ln.startswith("@@PROVISIONER-HEALTH-BEGIN")]
    assert order[:5] == ["meta", "nvlink_errors_0", "ib_counters_0", "nvlink_errors_1", "ib_counters_1"]
    assert out.index(COLLECT) > out.index("@@PROVISIONER-HEALTH-END ib_counters_1")
    assert out.index(COLLECT) < out.index("@@PROVISIONER-HEALTH-BEGIN nvsmi")
    assert READY not in out  # no textfile directory: the script reads nothing back


def test_lspci_keeps_only_the_functions_the_checks_read(tmp_path: Path) -> None:
    shim(tmp_path / "bin", "lspci", LSPCI_NN)
    sections = parse_sections(run(collector_script(EXP), path=tmp_path / "bin"))
    kept = [ln.split()[0] for ln in sections["lspci"].text.splitlines() if ln.startswith("0000:")]
    assert kept == ["0000:17:01.0", "0000:19:00.0"] and sections["lspci"].ok
    assert "Physical Slot: 28" in sections["lspci"].text


def test_lspci_without_class_ids_is_kept_whole(tmp_path: Path) -> None:
    plain = LSPCI_NN.replace(" [0604]", "").replace(" [0302]", "").replace(" [0880]", "").replace(" [0108]", "")
    shim(tmp_path / "bin", "lspci", plain)
    sections = parse_sections(run(collector_script(EXP), path=tmp_path / "bin"))
    assert sum(ln.startswith("0000:") for ln in sections["lspci"].text.splitlines()) == 4


def test_the_textfile_is_read_back_on_the_same_stdin_and_renamed_into_place(tmp_path: Path) -> None:
    d = tmp_path / "textfile"
    body = b'node_health_verdict{host="h1",remedy="none",verdict="golden"} 1\n'
    out = run(collector_script(EXP, textfile_dir=str(d)),
              b"TEXTFILE %d\n" % len(body) + body + b"touch " + str(tmp_path / "pwned").encode() + b"\n")
    assert READY in out and parse_sections(out)["textfile"].ok
    assert (d / "provisioner_health.prom").read_bytes() == body
    assert not list(d.glob(".provisioner_health.prom.*"))
    assert not (tmp_path / "pwned").exists()  # what follows the bytes is never run


def test_a_textfile_cut_short_is_not_installed(tmp_path: Path) -> None:
    d = tmp_path / "textfile"
    out = run(collector_script(EXP, textfile_dir=str(d)), b"TEXTFILE 100\nonly this")
    sec = parse_sections(out)["textfile"]
    assert not sec.ok and "cut short" in sec.text
    assert not (d / "provisioner_health.prom").exists() and not list(d.glob(".*"))


def test_no_textfile_sent_leaves_the_old_one(tmp_path: Path) -> None:
    d = tmp_path / "textfile"
    d.mkdir()
    (d / "provisioner_health.prom").write_text("old\n")
    out = run(collector_script(EXP, textfile_dir=str(d)))  # stdin closes after the script
    assert parse_sections(out)["textfile"].ok and (d / "provisioner_health.prom").read_text() == "old\n"


def test_with_wait_for_go_the_big_sections_wait_for_the_clients_line(tmp_path: Path) -> None:
    script = collector_script(EXP, wait_for_go=True)
    # bash reads the script from the pipe byte by byte: the read after COLLECT takes the line
    # the client sends after the script (were it not read, bash would run it: "GO: not found").
    proc = subprocess.Popen(["bash", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(script.encode())
    proc.stdin.flush()
    seen = b""
    while COLLECT.encode() not in seen:
        line = proc.stdout.readline()
        assert line, "the script ended before COLLECT"
        seen += line
    rest, err = proc.communicate(b"GO\n", timeout=120)
    assert "@@PROVISIONER-HEALTH-BEGIN nvsmi" in rest.decode() and b"GO" not in err
    # The end of its stdin (a session that sends nothing) lets it go on as well.
    assert "@@PROVISIONER-HEALTH-BEGIN nvsmi" in run(script)
    # Without wait_for_go the same line is a command of the script's (the test can fail).
    plain = subprocess.run(["bash", "-s"], input=collector_script(EXP).encode() + b"GO\n",
                           capture_output=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                           timeout=120, check=False)
    assert b"GO" in plain.stderr
