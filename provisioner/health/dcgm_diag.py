"""Parser of ``dcgmi diag -r LEVEL -j`` (DCGM 3.x and 4.x JSON).

Field names are those of NVIDIA/DCGM ``nvvs/include/NvvsJsonStrings.h`` and the writer
``dcgmi/Diag.cpp`` (``HelperJsonAddResult``), commit 72fa3fe:

| | DCGM 3.x | DCGM 4.x |
|---|---|---|
| top-level key | "DCGM GPU Diagnostic" | "DCGM Diagnostic" |
| who a result is about | "gpu_id" ("1") | "entity_group" ("GPU") + "entity_id" (1) |
| "warnings" | a string, or a list of {"warning": ...} | a list of {"warning", "error_id", ...} |
| per test | results only | results + "test_summary" {"status", "warnings"} |

A run that could not start has {"runtime_error": "..."} under the top-level key. Statuses are
"Pass", "Skip", "Not Run", "Warn", "Fail" (``Diag::HelperDisplayDiagResult``).

Exit status (``dcgmi`` exits with 256 + the dcgmReturn_t, ``dcgmlib/dcgm_structs.h``):
226 = DCGM_ST_NVVS_ERROR (-30, the diagnostic ran and a test failed), 205 =
DCGM_ST_NVVS_ISOLATE_ERROR (-51, an error that asks for isolation). The results, not the exit
status, say which GPU failed which test, so they are what is judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.health.jsontext import find_json

TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, 3.x
RC_NVVS_ERROR = 226  # 256 + DCGM_ST_NVVS_ERROR (-30)
RC_ISOLATE_ERROR = 205  # 256 + DCGM_ST_NVVS_ISOLATE_ERROR (-51)


class ShapeError(ValueError):
    """Well-formed JSON that is not a dcgmi diag document: the run cannot be judged."""


@dataclass
class DiagReport:
    """What one ``dcgmi diag -j`` run says: failing and warning results, how many results."""

    version: str | None = None
    runtime_error: str | None = None
    results: int = 0
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)  # entities named by a failure


def find_document(text: str) -> Any:
    """The JSON value dcgmi printed, wherever it is among banner and stderr lines (see
    ``find_json``); a document holding a DCGM top-level key wins."""
    return find_json(text, TOP_KEYS)


def _need(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise ShapeError(f"{where} is {type(value).__name__}, not {kind.__name__}")
    return value


def _entity(res: dict[str, Any]) -> str:
    """ "GPU 3" from 4.x entity_group/entity_id or 3.x gpu_id; "?" where neither is usable."""
    ident = res.get("entity_id", res.get("gpu_id"))
    group = res.get("entity_group")
    if isinstance(ident, bool) or not isinstance(ident, (int, str)) or str(ident).strip() == "":
        return "entity ?"
    return f"{group if isinstance(group, str) and group else 'GPU'} {str(ident).strip()}"


def _messages(node: dict[str, Any]) -> str:
    """The warning texts of a result or test summary (a string, strings, or {"warning": ...})."""
    raw = node.get("warnings")
    items = raw if isinstance(raw, list) else [raw]
    texts = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("warning")
        if isinstance(item, str) and item.strip():
            texts.append(item.strip())
    return "; ".join(texts)


def _status(node: dict[str, Any], where: str) -> str:
    return str(_need(node.get("status"), str, f"{where}.status")).strip().lower()


def _judge_test(test: dict[str, Any], where: str, report: DiagReport) -> None:
    name = test.get("name")
    name = name if isinstance(name, str) else "?"
    failed_here = False
    for k, res in enumerate(_need(test.get("results", []), list, f"{where}.results")):
        res = _need(res, dict, f"{where}.results[{k}]")
        status = _status(res, f"{where}.results[{k}]")
        report.results += 1
        who = _entity(res)
        line = f"{name}: {who} {_messages(res)}".strip()
        if status == "fail":
            failed_here = True
            report.failures.append(line)
            report.entities.append(who)
        elif status == "warn":
            report.warnings.append(line)
    summary = test.get("test_summary")
    # 4.x: errors not tied to one entity show only in the summary; a failed test is never lost.
    if isinstance(summary, dict) and not failed_here and _status(summary, f"{where}.test_summary") == "fail":
        report.results += 1
        report.failures.append(f"{name}: (no GPU named) {_messages(summary)}".strip())


def parse_diag(doc: Any) -> DiagReport:
    """Judge a decoded ``dcgmi diag -j`` document; raises ShapeError when it has another shape."""
    doc = _need(doc, dict, "the document")
    key = next((k for k in TOP_KEYS if k in doc), None)
    if key is None:
        raise ShapeError(f"no {' / '.join(repr(k) for k in TOP_KEYS)} key")
    body = _need(doc[key], dict, repr(key))
    version = body.get("version", doc.get("version"))
    report = DiagReport(version=version if isinstance(version, str) else None)
    err = body.get("runtime_error")
    if isinstance(err, str) and err.strip():
        report.runtime_error = err.strip()
        return report
    for i, cat in enumerate(_need(body.get("test_categories", []), list, "test_categories")):
        cat = _need(cat, dict, f"test_categories[{i}]")
        for j, test in enumerate(_need(cat.get("tests", []), list, f"test_categories[{i}].tests")):
            where = f"test_categories[{i}].tests[{j}]"
            _judge_test(_need(test, dict, where), where, report)
    return report
