"""DMTF's Redfish validators, run against a stand-in: the Service Validator (every resource a
service serves against the DMTF schema) and the Protocol Validator (the HTTP protocol rules).
They live in their own venv beside the project's, with the schema bundle
(scripts/deps/70-validators.sh)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support import machine

VENV = Path(os.environ.get("PROVISIONER_VALIDATORS_VENV")
            or Path(sys.prefix).parent / ".venv-validators")
SCHEMAS = VENV / "csdl"
DEPS = "scripts/deps/70-validators.sh"


@dataclass(frozen=True)
class Verdict:
    """What a validator run found: its exit status, its failures (one line each), its output."""

    rc: int
    failures: list[str]
    output: str


def service_validator(url: str, user: str, password: str, logdir: Path, *,
                      authtype: str = "Basic") -> Verdict:
    """The Service Validator over every resource reachable from the service root of ``url``."""
    exe = VENV / "bin" / "rf_service_validator"
    machine.require_tools([str(exe), str(SCHEMAS / "ServiceRoot_v1.xml")], DEPS)
    proc = subprocess.run(
        [str(exe), "--rhost", url, "-u", user, "-p", password, "--authtype", authtype,
         "--schema_directory", str(SCHEMAS), "--skipschema", "--logdir", str(logdir),
         "--timeout", "60"],
        capture_output=True, text=True, timeout=1200, check=False, cwd=logdir)
    failures = []
    for log in logdir.rglob("RedfishServiceValidatorDebug*.log"):
        failures += [line.split(" - ", 3)[-1] for line in log.read_text().splitlines()
                     if re.search(r" - (ERROR|CRITICAL) - ", line)]
    return Verdict(proc.returncode, failures, proc.stdout + proc.stderr)


def passed(verdict: Verdict) -> tuple[int, int]:
    """(passes, failures) of the Service Validator's summary table."""
    m = re.search(r"\|\s*PASS\s*\|.*\n.*\n\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|",
                  verdict.output)
    assert m, verdict.output[-3000:]
    return int(m.group(1)), int(m.group(3))
