"""JUnit XML of a health run: one test suite per host, one test case per check."""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from provisioner.health.model import HostReport, Status
from provisioner.safetext import xml_tree


def render_junit(reports: list[HostReport]) -> str:
    """JUnit XML: fail -> <failure>, error -> <error>, not_applicable -> <skipped>."""
    root = ET.Element("testsuites", name="provision health")
    for rep in reports:
        suite = ET.SubElement(
            root, "testsuite", name=rep.host,
            tests=str(len(rep.results)),
            failures=str(sum(r.status is Status.FAIL for r in rep.results)),
            errors=str(sum(r.status is Status.ERROR for r in rep.results)),
            skipped=str(sum(r.status is Status.NOT_APPLICABLE for r in rep.results)),
            time=f"{rep.duration_s:.3f}", timestamp=rep.started_at,
        )
        for r in rep.results:
            case = ET.SubElement(suite, "testcase", classname=rep.host, name=r.id)
            body = "\n".join([r.summary, *r.evidence])
            if r.status is Status.FAIL:
                el = ET.SubElement(case, "failure", message=r.summary, type=r.remedy.kind.value)
                el.text = body
            elif r.status is Status.ERROR:
                el = ET.SubElement(case, "error", message=r.summary)
                el.text = body
            elif r.status is Status.NOT_APPLICABLE:
                ET.SubElement(case, "skipped", message=r.summary)
            else:
                ET.SubElement(case, "system-out").text = f"{r.status.value}: {body}"
    ET.indent(xml_tree(root))  # what hosts printed (evidence) keeps the file parseable
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write a file via a temp file and rename, so CI never reads half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
