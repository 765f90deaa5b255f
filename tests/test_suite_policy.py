"""The suite tests itself alone: recordings are in the repository, and a skip for anything but a
missing machine capability fails the run (tests/skip_policy.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import CORPUS, REPO
from tests.support import machine

LACKING = "root"  # the capability the inner runs below pretend this machine lacks

SKIPS = '''
import pytest

from tests.support import machine

def test_data_missing():
    pytest.skip("recording not found: tests/fixtures/corpus/x")

def test_machine_lacks_root():
    machine.require("root")

def test_ok():
    pass
'''


@pytest.fixture
def rootless(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine, as far as the skip policy and `machine` can tell, does not run as root."""
    cap = machine.CAPABILITIES[LACKING]
    monkeypatch.setitem(machine.CAPABILITIES, LACKING,
                        machine.Capability(cap.name, cap.what, lambda: False))


def _inner(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=body)
    return pytester.runpytest("-p", "tests.skip_policy")


def test_a_skip_for_missing_data_fails_the_run(pytester: pytest.Pytester, rootless: None) -> None:
    result = _inner(pytester, SKIPS)
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skips refused*", "*test_data_missing: recording not found*"
                                 "refused: names no machine capability"])
    assert "test_machine_lacks_root:" not in result.stdout.str()


def test_capability_skips_alone_keep_the_run_green(pytester: pytest.Pytester,
                                                   rootless: None) -> None:
    body = SKIPS.replace('pytest.skip("recording not found: tests/fixtures/corpus/x")',
                         'machine.require("root")')
    body += ("\n@machine.needs('root')\ndef test_marked():\n    pass\n")
    result = _inner(pytester, body)
    result.assert_outcomes(passed=1, skipped=3)
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("ci", ["", "true"])
@pytest.mark.parametrize("reason", [
    "busybox not installed",  # a tool scripts/install-deps installs
    "needs root, dnsmasq and busybox",  # the wording that hid missing tools behind "root"
    "needs capability gpu: an H100",  # a name not on the list
    "needs capability root, tun: both",  # two at once
])
def test_a_skip_naming_no_listed_capability_fails_in_and_out_of_ci(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, rootless: None, ci: str,
        reason: str) -> None:
    monkeypatch.setenv("CI", ci)
    result = _inner(pytester, f"import pytest\n\ndef test_t():\n    pytest.skip({reason!r})\n")
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_capability_this_machine_has_is_no_reason_to_skip(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cap = machine.CAPABILITIES["tun"]
    monkeypatch.setitem(machine.CAPABILITIES, "tun", machine.Capability("tun", cap.what,
                                                                        lambda: True))
    result = _inner(pytester, "import pytest\nfrom tests.support import machine\n\n"
                              "def test_t():\n    pytest.skip(machine.skip_reason('tun'))\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*refused: this machine has tun"])


def test_a_module_skipped_at_collection_fails_the_run(pytester: pytest.Pytester) -> None:
    result = _inner(pytester, "import pytest\n\nnope = pytest.importorskip('no_such_module_x')\n"
                              "\ndef test_t():\n    pass\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skips refused*", "*could not import*no_such_module_x*"])


def test_a_missing_tool_fails_the_test_naming_the_fix(pytester: pytest.Pytester) -> None:
    result = _inner(pytester, "from tests.support import machine\n\ndef test_t():\n"
                              "    machine.require_tools(['no-such-tool-x', '/no/such/file'],"
                              " 'scripts/deps/50-deploy.list')\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not installed: no-such-tool-x, /no/such/file; "
                                 "./scripts/install-deps installs it (scripts/deps/50-deploy.list)"])


def test_every_skip_in_the_suite_goes_through_the_capability_list() -> None:
    """One wording for the plugin to parse: tests skip by machine.require/needs only."""
    direct = re.compile(r"pytest\.skip\(|mark\.skipif|importorskip\(|mark\.skip\b")
    here = {Path(__file__), REPO / "tests" / "skip_policy.py"}
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                 if p not in here and CORPUS not in p.parents
                 and REPO / "tests" / "support" not in p.parents
                 and direct.search(p.read_text())]
    assert offenders == []


def _imports(path: Path) -> list[str]:
    """Every module an import statement of `path` names (also inside functions)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_no_test_imports_another_test_module_or_a_benchmark() -> None:
    """Shared helpers live in tests/conftest.py and tests/support; stand-ins the benchmarks
    share in provisioner/testing."""
    offenders = [
        f"{p.relative_to(REPO)}: {name}"
        for p in (REPO / "tests").rglob("*.py") if CORPUS not in p.parents
        for name in _imports(p)
        if name.split(".")[0] == "benchmarks" or name.split(".")[-1].startswith("test_")
    ]
    assert offenders == []


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


def test_every_test_has_a_timeout_and_slow_kinds_get_longer_ones(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("pytest_plugins = ('tests.conftest',)\n")
    pytester.makeini("[pytest]\ntimeout = 600\nmarkers =\n    slow: x\n    molecule: x\n"
                     "    lab: x\n    longrun: x\n")
    pytester.makepyfile(test_inner='''
import pytest

def _limit(request):
    return request.node.get_closest_marker("timeout")

def test_plain(request):
    assert _limit(request) is None  # the ini default (600 s) applies

@pytest.mark.slow
def test_slow(request):
    assert _limit(request).args == (2400,)

@pytest.mark.lab
@pytest.mark.molecule
def test_both(request):
    assert _limit(request).args == (3600,)

@pytest.mark.slow
@pytest.mark.timeout(5)
def test_own(request):
    assert _limit(request).args == (5,)
''')
    result = pytester.runpytest("-p", "tests.skip_policy")
    result.assert_outcomes(passed=4)
