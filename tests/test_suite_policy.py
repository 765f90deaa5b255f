"""The suite tests itself alone: recordings are in the repository, and a skip for anything but a
missing machine capability fails the run (tests/skip_policy.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import CORPUS, REPO

SKIPS = '''
import pytest

def test_data_missing():
    pytest.skip("recording not found: tests/fixtures/corpus/x")

def test_machine_lacks_root():
    pytest.skip("needs root (network namespaces, dnsmasq on port 67)")

def test_ok():
    pass
'''


def test_a_skip_for_missing_data_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=SKIPS)
    result = pytester.runpytest("-p", "tests.skip_policy")
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skips refused*", "*test_data_missing: recording not found*"])
    assert "test_machine_lacks_root:" not in result.stdout.str()


def test_capability_skips_alone_keep_the_run_green(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=SKIPS.replace("recording not found", "needs root, really"))
    result = pytester.runpytest("-p", "tests.skip_policy")
    assert result.ret == pytest.ExitCode.OK


def test_a_missing_tool_fails_under_ci(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_inner='import pytest\n\ndef test_t():\n'
                                   '    pytest.skip("busybox not installed")\n')
    monkeypatch.delenv("CI", raising=False)
    assert pytester.runpytest("-p", "tests.skip_policy").ret == pytest.ExitCode.OK
    monkeypatch.setenv("CI", "true")
    assert pytester.runpytest("-p", "tests.skip_policy").ret == pytest.ExitCode.TESTS_FAILED


def test_no_test_reads_recordings_from_outside_the_repository() -> None:
    outside = re.compile(r"shared/corpus|PROVISIONER_CORPUS|\.\./shared")
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                 if CORPUS not in p.parents and outside.search(p.read_text())
                 and p != Path(__file__)]
    assert offenders == []


def test_every_recording_folder_says_where_it_came_from() -> None:
    folders = [p.parent for p in CORPUS.glob("*/*/PROVENANCE.md")]
    assert len(folders) == len([p for p in CORPUS.glob("*/*") if p.is_dir()]) >= 14
    for folder in folders:
        text = (folder / "PROVENANCE.md").read_text().lower()
        assert "licen" in text and ("http" in text or "written by" in text), folder
