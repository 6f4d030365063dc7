"""diagnose_files(): detect, parse and analyse capture files, per file and combined."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpunode.verify.checks import analyze, is_healthy
from gpunode.verify.detect import detect_kind
from gpunode.verify.errors import SmiParseError
from gpunode.verify.evidence import Evidence, Expectations
from gpunode.verify.kernel_log import scan_kernel_log
from gpunode.verify.lspci import PciDevice, parse_lspci
from gpunode.verify.model import Finding, SmiReport
from gpunode.verify.smi_csv import csv_query_kind, parse_smi_csv, parse_smi_list
from gpunode.verify.smi_table import parse_smi_table
from gpunode.verify.smi_text import parse_smi_text
from gpunode.verify.smi_xml import parse_smi_xml

# Richest report first: used when several files carry nvidia-smi output.
_REPORT_RANK = {"xml": 0, "text": 1, "csv": 2, "table": 3, "list": 4}
_SMI_PARSERS = {"smi-xml": parse_smi_xml, "smi-text": parse_smi_text, "smi-table": parse_smi_table,
                "smi-csv": parse_smi_csv, "smi-list": parse_smi_list}
_UNKNOWN = ("not a recognised capture; expected nvidia-smi -q -x / -q / plain table / --query-gpu CSV / -L, "
            "lspci -nn, a kernel log (dmesg, journalctl -k) or captured nvidia-smi/docker error output")


@dataclass
class FileResult:
    """What one file was, what it said, and the findings from it alone."""

    path: str
    kind: str
    ok: bool
    message: str
    report: SmiReport | None = None
    pci_devices: list[PciDevice] | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "kind": self.kind,
            "ok": self.ok,
            "message": self.message,
            "report": self.report.to_dict() if self.report else None,
            "pci_devices": [d._asdict() for d in self.pci_devices] if self.pci_devices is not None else None,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class DiagnoseResult:
    """Per-file results plus the analysis of all evidence combined."""

    files: list[FileResult]
    findings: list[Finding]

    @property
    def healthy(self) -> bool:
        return is_healthy(self.findings)

    def to_dict(self) -> dict[str, object]:
        return {
            "healthy": self.healthy,
            "files": [f.to_dict() for f in self.files],
            "findings": [f.to_dict() for f in self.findings],
        }

    def render_text(self) -> str:
        """Human-readable report."""
        lines = [f"Files ({len(self.files)}):"]
        for result in self.files:
            mark = "ok " if result.ok else "ERR"
            lines.append(f"  [{mark}] {result.path}: {result.kind}: {result.message}")
        lines.append("")
        if not self.findings:
            lines.append("Findings: none")
        else:
            lines.append(f"Findings ({len(self.findings)}):")
            for finding in self.findings:
                where = f" [{finding.gpu}]" if finding.gpu else ""
                lines.append(f"  {finding.severity.upper():8} {finding.id}{where}: {finding.summary}")
                lines.append(f"           evidence: {finding.evidence}")
                lines.append(f"           remedy:   {finding.remedy}")
        critical = sum(1 for f in self.findings if f.severity == "critical")
        warnings = sum(1 for f in self.findings if f.severity == "warning")
        verdict = "HEALTHY" if self.healthy else "UNHEALTHY"
        lines.append("")
        lines.append(f"Result: {verdict} ({critical} critical, {warnings} warning)")
        return "\n".join(lines) + "\n"


def diagnose_files(paths: list[Path], expectations: Expectations | None = None) -> DiagnoseResult:
    """Analyse each file alone, then all of them together as one host."""
    files: list[FileResult] = []
    combined = Evidence(expectations=expectations or Expectations())
    for path in paths:
        result, evidence = _one_file(Path(path), combined.expectations)
        files.append(result)
        if evidence is not None:
            _merge_into(combined, evidence)
    return DiagnoseResult(files, analyze(combined) if _has_any(combined) else [])


def _one_file(path: Path, expectations: Expectations) -> tuple[FileResult, Evidence | None]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return FileResult(str(path), "unreadable", False, f"cannot read file: {exc.strerror or exc}"), None
    if b"\x00" in raw[:4096]:
        return FileResult(str(path), "unknown", False, "binary file; " + _UNKNOWN), None
    text = raw.decode("utf-8", errors="replace")
    kind = detect_kind(text)
    evidence = Evidence(expectations=expectations)
    try:
        message, report = _read(kind, text, evidence)
    except SmiParseError as exc:
        return FileResult(str(path), kind, False, str(exc)), None
    except Exception as exc:  # one odd capture must not end diagnose with a traceback
        message = f"could not parse this {kind} file ({exc!r}); please report it with the file attached"
        return FileResult(str(path), kind, False, message), None
    if kind == "unknown":
        return FileResult(str(path), kind, False, message), None
    findings = analyze(evidence) if _has_any(evidence) else []
    return FileResult(str(path), kind, True, message, report, evidence.pci_devices, findings), evidence


def _read(kind: str, text: str, evidence: Evidence) -> tuple[str, SmiReport | None]:
    """Fill evidence from text of the given kind; return a one-line description."""
    if kind == "smi-csv" and csv_query_kind(text) != "gpu":
        rows = sum(1 for line in text.splitlines()[1:] if line.strip())
        return (f"nvidia-smi --query-{csv_query_kind(text)} CSV with {rows} row(s); it lists no GPUs and is "
                "not used in the analysis"), None
    if kind in _SMI_PARSERS:
        report = _SMI_PARSERS[kind](text)
        evidence.smi = report
        names = sorted({g.name for g in report.gpus if g.name})
        message = (f"driver {report.driver_version or '?'}, CUDA {report.cuda_version or '?'}, "
                   f"{report.gpu_count} GPU(s): {', '.join(names) or '?'}")
        if report.warnings:
            message += f" (warning: {'; '.join(report.warnings)})"
        return message, report
    if kind == "lspci":
        devices = parse_lspci(text)
        evidence.pci_devices = devices
        gpus = sum(1 for d in devices if not d.is_nvswitch)
        return f"{gpus} NVIDIA GPU(s), {len(devices) - gpus} NVSwitch(es)", None
    if kind == "kernel-log":
        evidence.kernel_log = text
        scan = scan_kernel_log(text)
        counts = ", ".join(f"Xid {code} x{n}" for code, n in sorted(scan.xid_counts().items())) or "no Xid"
        return f"{counts}; {len(scan.lost)} fallen-off-the-bus line(s)", None
    if kind == "error-text":
        evidence.smi_error = text
        return "captured nvidia-smi/NVML/docker error output", None
    return _UNKNOWN, None


def _has_any(evidence: Evidence) -> bool:
    return any(x is not None for x in (evidence.smi, evidence.smi_error, evidence.pci_devices,
                                        evidence.kernel_log))


def _merge_into(combined: Evidence, evidence: Evidence) -> None:
    report = evidence.smi
    if report is not None and (combined.smi is None or _better(report, combined.smi)):
        combined.smi = report
    if evidence.smi_error:
        combined.smi_error = "\n".join(t for t in (combined.smi_error, evidence.smi_error) if t)
    if evidence.kernel_log:
        combined.kernel_log = "\n".join(t for t in (combined.kernel_log, evidence.kernel_log) if t)
    if evidence.pci_devices is not None:
        known = {(d.slot, d.device_id) for d in combined.pci_devices or []}
        new = [d for d in evidence.pci_devices if (d.slot, d.device_id) not in known]
        combined.pci_devices = [*(combined.pci_devices or []), *new]


def _better(new: SmiReport, old: SmiReport) -> bool:
    return (_REPORT_RANK[new.source_kind], -len(new.gpus)) < (_REPORT_RANK[old.source_kind], -len(old.gpus))
