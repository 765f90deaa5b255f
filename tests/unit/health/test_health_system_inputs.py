"""zfs.docker and disk.usage on what the collector really gets: stderr merged into the section
(2>&1), zpool's "no pools available", space-separated columns, docker info JSON of another
type. Hostile lines are written here; the bases are the project's fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.model import RemedyKind, Status

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
ZFS = Expectations(settings=HealthSettings(zfs=True))
NO_ZFS = Expectations()
DOCKER = (FIX / "docker-info.zfs.json").read_text()
ONLINE = (FIX / "zpool-list.online.txt").read_text()


def run(expect: Expectations = ZFS, **texts: str):
    sections = {k: Section(k, 0, v) for k, v in texts.items()}
    return {r.id: r for r in run_checks(Context(host="h1", sections=sections, expect=expect))}


@pytest.mark.parametrize("text", ["no pools available\n", "no pools available\r\n"])
def test_no_pools_available_fails_when_zfs_is_expected(text):
    r = run(zpool=text, docker_info=DOCKER)["zfs.docker"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REIMAGE
    assert run(NO_ZFS, zpool=text)["zfs.docker"].status is Status.NOT_APPLICABLE


@pytest.mark.parametrize("line", ["tank  DEGRADED  12%", "tank DEGRADED 12%", "tank\t DEGRADED\t12%"])
def test_degraded_pool_fails_whatever_the_whitespace(line):
    r = run(zpool=line + "\n", docker_info=DOCKER)["zfs.docker"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert r.summary == "zpool(s) not ONLINE: tank DEGRADED"


def test_zpool_output_without_a_pool_line_cannot_be_judged():
    r = run(zpool="zpool: something unexpected\n", docker_info=DOCKER)["zfs.docker"]
    assert r.status is Status.ERROR


@pytest.mark.parametrize("doc", ["[1]", "null", '"zfs"', "[]"])
def test_docker_info_json_of_another_type_cannot_be_judged(doc):
    r = run(zpool=ONLINE, docker_info=doc)["zfs.docker"]
    assert r.status is Status.ERROR and "crashed" not in r.summary


def test_stderr_line_after_docker_info_json_keeps_a_healthy_host_healthy():
    text = DOCKER.rstrip("\n") + "\nWARNING: bridge-nf-call-iptables is disabled\n"
    r = run(zpool=ONLINE, docker_info=text)["zfs.docker"]
    assert r.status is Status.PASS and r.observed["docker_driver"] == "zfs"


def test_df_error_line_before_the_header_still_judges_the_other_filesystems():
    text = "df: /mnt/nfs: Stale file handle\n" + (FIX / "df-P-B1.one-full.txt").read_text()
    r = run(NO_ZFS, df=text)["disk.usage"]
    assert r.status is Status.FAIL and "/var/lib/docker 97.3%" in r.summary
