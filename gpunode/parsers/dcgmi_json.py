"""`dcgmi diag -r N -j` / `--json` documents (and nvvs's own JSON, which shares the layout).

The shape, read from NVIDIA/DCGM (tag v3.3.9 = commit 3869efb35c99; "DCGM 4.6.0 (#306)" = commit 72fa3feaa67d):

* the root key is NVVS_NAME (nvvs/include/NvvsJsonStrings.h line 34): "DCGM GPU Diagnostic" up to 3.x,
  "DCGM Diagnostic" from tag v4.0.0; under it "test_categories" (NVVS_HEADERS), each
  {"category", "tests": [{"name", "results": [...]}]} (same file, lines 20-28).
* 3.x (dcgmi/Diag.cpp at v3.3.9): HelperJsonAddResult, lines 1334-1372, writes one result per GPU as
  {"gpu_id": "<n>" (a string), "status", "warnings": [{"warning", "error_id", "error_category",
  "error_severity"}], "info": "<text>"}; the Deployment tests (HelperJsonAddBasicTests, lines 1238-1269) have a
  single result with "gpu_id" only when they carry an error, and their warning text under "warnings", not
  "warning" (line 1260).
* 4.x (dcgmi/Diag.cpp at 72fa3feaa67d): HelperJsonAddResult, lines 1056-1120, writes per entity {"entity_group",
  "entity_group_id", "entity_id" (a number), "status", "warnings": [{"warning", ...}], "info": ["<text>", ...]};
  HelperJsonAddTestSummary (lines 1219-1233) adds "test_summary" {"status", "warnings"} per test.
  "status" comes from HelperDisplayDiagResult (lines 845-866) without DDR_DISPLAY_WARN, so a per-entity Warn
  is written "Fail" in 4.x JSON; "Not Run" results are left out.
* nvvs's own JSON (the vendor fixtures testing/TestDiagManagerStrings.h, nvvs/src/tests/JsonResultTests.cpp)
  uses upper-case statuses (PASS/FAIL/SKIP/WARN) and "gpu_ids" (a number or "0,1,2"), and may hold nulls
  between tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_ROOT = re.compile(r'"DCGM (?:GPU )?Diagnostic"\s*:\s*\{')
_STATUS = {"pass": "Pass", "fail": "Fail", "warn": "Warn", "warning": "Warn", "skip": "Skip"}


@dataclass
class DiagResult:
    """One test's result for one GPU (gpu None: a result that names no GPU, e.g. a passing Deployment test)."""

    category: str
    test: str
    gpu: str | None
    status: str  # Pass | Fail | Warn | Skip (as written, when none of these)
    warnings: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)


def is_dcgmi_json(text: str) -> bool:
    """True when text holds a dcgmi diag / nvvs JSON document with test results (its root key, a parseable
    object, "test_categories"); one holding only a "runtime_error" is left to the error readers."""
    return any(isinstance(_root(doc).get("test_categories"), list) for doc in dcgmi_json_documents(text)[0])


def _root(doc: dict[str, Any]) -> dict[str, Any]:
    return next((doc[k] for k in ROOT_KEYS if isinstance(doc.get(k), dict)), {})


def dcgmi_json_documents(text: str) -> tuple[list[dict[str, Any]], str]:
    """(the DCGM diagnostic documents in text, the text left around them)."""
    spans = dcgmi_json_spans(text)
    docs = [doc for _, _, doc in spans]
    edges = [0, *(i for start, end, _ in spans for i in (start, end)), len(text)]
    return docs, "".join(text[edges[i]:edges[i + 1]] for i in range(0, len(edges), 2))


def dcgmi_json_spans(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """(start, end, document) of each DCGM diagnostic JSON document in text, in order."""
    spans: list[tuple[int, int, dict[str, Any]]] = []
    pos = 0
    decoder = json.JSONDecoder()
    for match in _ROOT.finditer(text):
        if match.start() < pos:
            continue
        start = text.rfind("{", pos, match.start())
        if start < 0:
            continue
        try:
            doc, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(doc, dict) and any(isinstance(doc.get(k), dict) for k in ROOT_KEYS):
            spans.append((start, end, doc))
            pos = end
    return spans


def dcgmi_json_results(doc: dict[str, Any]) -> list[DiagResult]:
    """Every per-test, per-GPU result in one document, in document order."""
    root = _root(doc)
    results: list[DiagResult] = []
    for category in _dicts(root.get("test_categories")):
        for test in _dicts(category.get("tests")):
            entries = _dicts(test.get("results"))
            summary = test.get("test_summary")
            if not entries and isinstance(summary, dict):
                entries = [summary]
            for entry in entries:
                results.append(DiagResult(str(category.get("category", "")), str(test.get("name", "")),
                                          _gpu(entry), _status(entry.get("status")), _warnings(entry),
                                          _info(entry.get("info"))))
    return results


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _gpu(entry: dict[str, Any]) -> str | None:
    group = entry.get("entity_group")
    if "entity_id" in entry and group not in (None, "GPU"):
        return f"{group} {entry['entity_id']}"
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        if entry.get(key) is not None and str(entry[key]).strip() != "":
            return str(entry[key]).replace(" ", "")
    return None


def _status(value: Any) -> str:
    text = str(value or "").strip()
    return _STATUS.get(text.lower(), text)


def _warnings(entry: dict[str, Any]) -> list[str]:
    found = []
    for warning in entry.get("warnings") or []:
        if isinstance(warning, dict):
            message = warning.get("warning") or warning.get("warnings")  # 3.x Deployment rows: "warnings"
            if message:
                found.append(str(message).strip())
        elif warning:
            found.append(str(warning).strip())
    return found


def _info(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if v]
    return [str(value).strip()] if value else []


def result_detail(result: DiagResult) -> str:
    """What the text table writes after a result's status: "GPU: 0 (message; message)" / "GPUs: 0, 1"."""
    where = ""
    if result.gpu is not None:
        where = result.gpu if result.gpu[:1].isalpha() else \
            f"GPU{'s' if ',' in result.gpu else ''}: {result.gpu.replace(',', ', ')}"
    detail = f"({'; '.join(result.warnings)})" if result.warnings else ""
    return " ".join(part for part in (where, detail) if part)
