"""`dcgmi diag -r N` result tables: each test's Pass / Fail / Warn / Skip."""

from __future__ import annotations

import re

from gpunode.verify.model import Finding, Severity

_HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", re.M)
_ROW = re.compile(r"^\|\s*(?P<test>[A-Za-z][^|]*?)\s*\|\s*(?P<result>Pass|Fail|Warn|Skip)\b(?P<rest>[^|]*)\|", re.M)
_DETAIL = re.compile(r"^\|\s*(?:Error|Warning|Info)\s*\|\s*(?P<text>[^|]*?)\s*\|", re.M)


def is_dcgmi_diag(text: str) -> bool:
    """True for the result table `dcgmi diag` prints."""
    return _HEADER.search(text) is not None and _ROW.search(text) is not None


def dcgmi_findings(text: str) -> tuple[int, list[Finding]]:
    """(tests read, findings): dcgm-diag-failed for failed tests (critical), dcgm-diag-warning for warnings."""
    rows = [(m.group("test"), m.group("result"), m.group("rest").strip(" -")) for m in _ROW.finditer(text)]
    details = [m.group("text") for m in _DETAIL.finditer(text) if m.group("text")]
    findings: list[Finding] = []
    checks: tuple[tuple[str, str, Severity], ...] = (("Fail", "dcgm-diag-failed", "critical"),
                                                     ("Warn", "dcgm-diag-warning", "warning"))
    for result, check_id, severity in checks:
        hit = [f"{test}: {result}{' - ' + rest if rest else ''}" for test, res, rest in rows if res == result]
        if hit:
            findings.append(Finding(
                check_id, severity, f"DCGM diagnostics: {len(hit)} test(s) {result.lower()}ed",
                "; ".join(hit + details[:5]),
                "Read the failing test's message (`dcgmi diag -r 3 -v` for details): a memory/ECC failure means "
                "drain and RMA the GPU; PCIe/NVLink bandwidth failures point at seating, risers or the baseboard; "
                "a Denylist/driver failure at the software stack. Re-run after a GPU reset to confirm."))
    return len(rows), findings
