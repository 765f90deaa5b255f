"""Parser of ``dcgmi diag -r LEVEL -j`` (DCGM 2.x, 3.x and 4.x JSON).

Field names are those of NVIDIA/DCGM's ``nvvs/include/NvvsJsonStrings.h`` and the JSON writers
in ``dcgmi/Diag.cpp`` / ``nvvs`` across the releases in its history (2.2.6 to 4.6.0):

| | DCGM 2.x, 3.0-3.2 | DCGM 3.3 | DCGM 4.x |
|---|---|---|---|
| top-level key | "DCGM GPU Diagnostic" | "DCGM GPU Diagnostic" | "DCGM Diagnostic" |
| who a result is about | "gpu_ids": "3" or "0,1,2,3" (a result for several GPUs), or none | "gpu_id": "3" | "entity_group" ("GPU", "Switch", "CPU", ...) + "entity_id" |
| "warnings" | a string | a list of {"warning", "error_id", ...} | same |
| per test | results | results | results + "test_summary" {"status", "warnings"} |
| GPU serials | - | "GPU Device Serials" {"0": "165..."} | "entity_groups"[].entities[] {"entity_id", "serial_num"} |
| version | "version" in the body | "version" at the root | "metadata" {"version", "Driver Version Detected"} |

Statuses are "Pass", "Skip", "Warn", "Fail", "Not Run" (2.x/3.x print a warning as "Fail"); the
3.1 nvvs writer prints them in capitals ("PASS"). jsoncpp fills array slots that were never
written with ``null`` (a test not run on a GPU, the deployment test that is skipped): a null is
not a result. ``dcgmi diag --iterations N -j`` wraps the documents in {"iterations": [...],
"Overall Result": ...}. A run that could not start has {"runtime_error": "..."}.

Exit status (``dcgmi`` exits with 256 + the dcgmReturn_t, ``dcgmlib/dcgm_structs.h``): 226 =
DCGM_ST_NVVS_ERROR (-30, a test failed), 205 = DCGM_ST_NVVS_ISOLATE_ERROR (-51). The results,
not the exit status, say which GPU failed which test, so they are what is judged; an entry the
parser cannot place is kept (``Unplaced``) and named, never a reason to judge nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from provisioner.health.jsontext import find_json

TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, 2.x/3.x
RC_NVVS_ERROR = 226  # 256 + DCGM_ST_NVVS_ERROR (-30)
RC_ISOLATE_ERROR = 205  # 256 + DCGM_ST_NVVS_ISOLATE_ERROR (-51)
STATUSES = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip",
            "skipped": "skip", "not run": "not run", "notrun": "not run", "not_run": "not run"}
_IDS = re.compile(r"^\s*[0-9]{1,4}(\s*,\s*[0-9]{1,4})*\s*$")
_MAX_ENTRIES = 20_000  # results read from one document (a hostile one may hold millions)


class ShapeError(ValueError):
    """Well-formed JSON that is not a dcgmi diag document: the run cannot be judged."""


@dataclass(frozen=True)
class DiagResult:
    """One test result: about one entity, several GPUs at once, or none (a global result)."""

    test: str
    category: str
    status: str  # pass, fail, warn, skip, not run
    group: str  # "GPU", "Switch", "CPU", ... ("GPU" when 2.x/3.x name GPU ids)
    ids: tuple[int, ...]  # empty: a result about no entity in particular
    messages: tuple[str, ...]
    where: str  # its JSON path, e.g. test_categories[1].tests[0].results[3]

    def text(self) -> str:
        """"memory: GPU 3 Fail: the message"."""
        who = f"{self.group} {','.join(map(str, self.ids))}" if self.ids else "(no entity)"
        msg = f": {'; '.join(self.messages)}" if self.messages else ""
        return f"{self.test}: {who} {self.status}{msg}"


@dataclass(frozen=True)
class Unplaced:
    """An entry of the document that is not a result this parser can read."""

    where: str
    why: str


@dataclass
class DiagReport:
    """What one ``dcgmi diag -j`` run says."""

    version: str | None = None
    driver: str | None = None
    runtime_error: str | None = None
    overall: str | None = None  # --iterations: "Overall Result"
    notice: str | None = None  # a document-level "Warning"
    results: list[DiagResult] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    nulls: int = 0  # array slots DCGM left empty
    serials: dict[int, str] = field(default_factory=dict)  # GPU entity id -> board serial

    def of(self, *statuses: str) -> list[DiagResult]:
        """The results with one of these statuses."""
        return [r for r in self.results if r.status in statuses]


def find_document(text: str) -> Any:
    """The JSON value dcgmi printed, wherever it is among banner and stderr lines (see
    ``find_json``); a document holding a DCGM top-level key (or iterations) wins."""
    return find_json(text, (*TOP_KEYS, "iterations"))


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _messages(node: dict[str, Any]) -> tuple[str, ...]:
    """Warning texts: a string, a list of strings, or of {"warning": ...} objects."""
    raw = node.get("warnings")
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if isinstance(item, dict):  # 3.3's deployment results nest the text as "warnings" too
            item = item.get("warning", item.get("warnings"))
        if isinstance(item, str) and item.strip():
            out.append(item.strip()[:500])
    return tuple(out)


def _ids(value: Any) -> tuple[int, ...] | None:
    """GPU/entity ids from 3 / "3" / "0,1,2,3"; None when the value names no id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 <= value < 10_000:
        return (value,)
    if isinstance(value, str) and _IDS.match(value):
        return tuple(int(p) for p in value.split(","))
    return None


def _who(res: dict[str, Any]) -> tuple[str, tuple[int, ...], str | None]:
    """(entity group, ids, problem) of a result; no id key at all is a global result."""
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        if key in res:
            ids = _ids(res[key])
            group = _text(res.get("entity_group")) if key == "entity_id" else None
            if ids is None:
                return group or "GPU", (), f"{key} {str(res[key])[:40]!r} names no entity"
            return group or "GPU", ids, None
    return "", (), None


class _Reader:
    """Walks one document, keeping what it cannot place instead of giving up on all of it."""

    def __init__(self, report: DiagReport) -> None:
        self.report = report

    def unplaced(self, where: str, why: str) -> None:
        self.report.unplaced.append(Unplaced(where, why))

    def items(self, value: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
        """The objects of a list, each with its path; nulls counted, anything else unplaced."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.unplaced(where, f"is {type(value).__name__}, not a list")
            return []
        out = []
        for i, item in enumerate(value[:_MAX_ENTRIES]):
            if item is None:
                self.report.nulls += 1
            elif isinstance(item, dict):
                out.append((f"{where}[{i}]", item))
            else:
                self.unplaced(f"{where}[{i}]", f"is {type(item).__name__}, not an object")
        return out

    def result(self, res: dict[str, Any], where: str, test: str, category: str) -> None:
        raw = res.get("status")
        status = STATUSES.get(raw.strip().lower()) if isinstance(raw, str) else None
        if status is None:
            self.unplaced(where, f"status {str(raw)[:40]!r} is not one DCGM writes")
            return
        group, ids, problem = _who(res)
        if problem:
            self.unplaced(where, problem)  # still judged, by its status, as a global result
        self.report.results.append(DiagResult(test, category, status, group, ids, _messages(res), where))

    def test(self, test: dict[str, Any], where: str, category: str) -> None:
        name = _text(test.get("name")) or "?"
        before = len(self.report.results)
        for path, res in self.items(test.get("results"), f"{where}.results"):
            self.result(res, path, name, category)
        mine = self.report.results[before:]
        summary = test.get("test_summary")
        if not isinstance(summary, dict):
            return
        status = STATUSES.get(str(summary.get("status") or "").strip().lower())
        # 4.x: an error no entity owns shows only in the summary; a failed test is never lost.
        if status in ("fail", "warn") and not any(r.status == status for r in mine):
            self.report.results.append(DiagResult(name, category, status, "", (), _messages(summary),
                                                  f"{where}.test_summary"))

    def body(self, body: dict[str, Any], prefix: str) -> None:
        for cpath, cat in self.items(body.get("test_categories"), f"{prefix}test_categories"):
            category = _text(cat.get("category")) or "?"
            for tpath, test in self.items(cat.get("tests"), f"{cpath}.tests"):
                self.test(test, tpath, category)


def _serials(doc: dict[str, Any], body: dict[str, Any]) -> dict[int, str]:
    """GPU entity id -> serial: 3.3's "GPU Device Serials", 4.x's "entity_groups"."""
    out: dict[int, str] = {}
    for source in (doc, body):
        table = source.get("GPU Device Serials")
        if isinstance(table, dict):
            for k, v in table.items():
                ids = _ids(k)
                if ids and len(ids) == 1 and _text(v):
                    out[ids[0]] = str(v).strip()
    groups = doc.get("entity_groups")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict) or _text(group.get("entity_group")) != "GPU":
            continue
        entities = group.get("entities")
        for ent in entities if isinstance(entities, list) else []:
            if isinstance(ent, dict):
                ids = _ids(ent.get("entity_id"))
                if ids and len(ids) == 1 and _text(ent.get("serial_num")):
                    out[ids[0]] = str(ent["serial_num"]).strip()
    return out


def _one(doc: dict[str, Any], report: DiagReport, prefix: str) -> None:
    key = next((k for k in TOP_KEYS if k in doc), None)
    if key is None:
        raise ShapeError(f"no {' / '.join(repr(k) for k in TOP_KEYS)} key")
    body = doc[key]
    if not isinstance(body, dict):
        raise ShapeError(f"{key!r} is {type(body).__name__}, not an object")
    found = doc.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    report.version = report.version or next(
        (v for v in (_text(body.get("version")), _text(doc.get("version")), _text(meta.get("version"))) if v), None)
    report.driver = report.driver or next(
        (v for v in (_text(doc.get("Driver Version Detected")), _text(body.get("Driver Version Detected")),
                     _text(meta.get("Driver Version Detected"))) if v), None)
    err = _text(body.get("runtime_error")) or _text(doc.get("runtime_error"))
    if err:
        report.runtime_error = err[:500]
    report.notice = report.notice or _text(body.get("Warning")) or _text(doc.get("Warning"))
    report.serials.update(_serials(doc, body))
    _Reader(report).body(body, prefix)


def parse_diag(doc: Any) -> DiagReport:
    """Read a decoded ``dcgmi diag -j`` document; ShapeError when it is not one at all."""
    if not isinstance(doc, dict):
        raise ShapeError(f"the document is {type(doc).__name__}, not an object")
    report = DiagReport()
    runs = doc.get("iterations")
    if isinstance(runs, list) and not any(k in doc for k in TOP_KEYS):
        report.overall = _text(doc.get("Overall Result"))
        report.notice = _text(doc.get("Warning"))
        for i, run in enumerate(runs[:100]):
            if isinstance(run, dict):
                try:
                    _one(run, report, f"iterations[{i}].")
                except ShapeError as exc:
                    report.unplaced.append(Unplaced(f"iterations[{i}]", str(exc)))
            elif run is None:
                report.nulls += 1
            else:
                report.unplaced.append(Unplaced(f"iterations[{i}]", f"is {type(run).__name__}"))
        return report
    _one(doc, report, "")
    return report
