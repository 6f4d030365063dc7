"""diagnose_files(): detect, parse and analyse capture files, per file and combined."""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.verify import host_evidence
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
_ACCEPTS = ("nvidia-smi -q -x / -q / plain table (or a fragment) / --query-gpu CSV / -L, lspci (-nn), a kernel "
            "log (dmesg, journalctl -k, syslog), captured nvidia-smi/docker/podman/containerd error output, a "
            "`gpunode collect` bundle (.tar.gz) or a folder of these")
_UNKNOWN = "not a recognised capture; expected " + _ACCEPTS


# Recognised files that carry no health evidence: listed as "not applicable", never as unknown.
_NOT_APPLICABLE = (
    ("smi-topo", re.compile(r"GPU0\s.*CPU Affinity"), "nvidia-smi topo -m"),
    ("smi-nvlink", re.compile(r"^GPU \d+: .*\n\s+Link \d+: ", re.M), "nvidia-smi nvlink -s"),
    ("smi-dmon", re.compile(r"^# gpu\s+(?:pwr|sm)\b", re.M), "nvidia-smi dmon / pmon"),
    ("smi-help", re.compile(r"List of valid properties to query|NVIDIA System Management Interface -- "
                            r"v\d", re.M), "nvidia-smi help text"),
    ("command-line", re.compile(r"^\s*(?:\$ )?nvidia-smi\S*(?: [^\n]*)?\s*$"), "an nvidia-smi command line"),
    ("uname", re.compile(r"^Linux \S+ \d+\.\d+\S* #"), "uname -a"),
    ("driver-version", re.compile(r"^NVRM version: ", re.M), "/proc/driver/nvidia/version"),
    ("dkms-status", re.compile(r"^(?:[\w-]+[/,] ?[\w.-]+.*: (?:installed|built|added)\S*)(?:\n|$)"),
     "dkms status"),
    ("docker-daemon-json", re.compile(r"^\s*\{[\s\S]*\"(?:runtimes|default-runtime|log-driver|"
                                      r"exec-opts|data-root)\"", re.M), "docker daemon.json"),
    ("fabricmanager-log", re.compile(r"^\[\w{3} \d{1,2} \d{4} \d{2}:\d{2}:\d{2}\] \[(?:INFO|WARNING|ERROR)\] "
                                     r"\[tid \d+\]"), "nvidia-fabricmanager's own log"),
    ("collect-note", re.compile(r"^# gpunode-collect: ", re.M), "a note written by `gpunode collect`"),
)

NOT_APPLICABLE_KINDS = frozenset(kind for kind, _, _ in _NOT_APPLICABLE)


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
    def unreadable(self) -> list[FileResult]:
        """Files that were not understood (unknown, binary, empty, missing, unreadable, parse error)."""
        return [f for f in self.files if not f.ok]

    @property
    def healthy(self) -> bool | None:
        """False with a critical finding; None (unknown) when any input was not understood or there was
        none; True only when every file was understood and nothing is critical."""
        if not is_healthy(self.findings):
            return False
        if self.unreadable or not any(f.ok and f.kind not in NOT_APPLICABLE_KINDS for f in self.files):
            return None
        return True

    @property
    def verdict(self) -> str:
        return {True: "healthy", False: "unhealthy", None: "unknown"}[self.healthy]

    @property
    def report(self) -> SmiReport | None:
        """The richest nvidia-smi report of all files."""
        best: SmiReport | None = None
        for result in self.files:
            if result.report is not None and (best is None or _better(result.report, best)):
                best = result.report
        return best

    def to_dict(self) -> dict[str, object]:
        report = self.report
        return {
            "kind": "diagnose",
            "healthy": self.healthy,
            "verdict": self.verdict,
            "driver_version": report.driver_version if report else None,
            "cuda_version": report.cuda_version if report else None,
            "gpus": [gpu.to_dict() for gpu in report.gpus] if report else [],
            "findings": [f.to_dict() for f in self.findings],
            "files": [f.to_dict() for f in self.files],
        }

    def render_text(self) -> str:
        """Human-readable report."""
        lines = [f"Files ({len(self.files)}):"]
        for result in self.files:
            mark = ("n/a" if result.kind in NOT_APPLICABLE_KINDS else "ok ") if result.ok else "ERR"
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
        lines.append("")
        if self.healthy is None:
            names = ", ".join(f.path for f in self.unreadable) or "no capture with GPU evidence"
            lines.append(f"Result: UNKNOWN ({critical} critical, {warnings} warning): not understood: {names}. "
                         f"diagnose reads {_ACCEPTS}")
        else:
            verdict = "HEALTHY" if self.healthy else "UNHEALTHY"
            lines.append(f"Result: {verdict} ({critical} critical, {warnings} warning)")
        return "\n".join(lines) + "\n"


def diagnose_files(paths: list[Path], expectations: Expectations | None = None) -> DiagnoseResult:
    """Analyse each file alone, then all of them together as one host."""
    files: list[FileResult] = []
    combined = Evidence(expectations=expectations or Expectations())
    for name, raw in _inputs([Path(p) for p in paths]):
        result, evidence = _one_file(name, raw, combined.expectations)
        files.append(result)
        if evidence is not None:
            _merge_into(combined, evidence)
    return DiagnoseResult(files, analyze(combined) if _has_any(combined) else [])


def _inputs(paths: list[Path]) -> list[tuple[str, bytes | OSError]]:
    """(name, content or the error reading it) for every file; folders are walked, tar archives opened."""
    found: list[tuple[str, bytes | OSError]] = []
    for path in paths:
        if path.is_dir():
            found += _inputs(sorted(p for p in path.rglob("*") if p.is_file()))
            continue
        try:
            raw = path.read_bytes()
        except OSError as exc:
            found.append((str(path), exc))
            continue
        members = _tar_members(raw)
        if members is None:
            found.append((str(path), raw))
        else:
            found += [(f"{path}:{name}", data) for name, data in members]
    return found


def _tar_members(raw: bytes) -> list[tuple[str, bytes]] | None:
    """Regular files of a (gzip/bzip2/xz) tar archive, or None when raw is not one."""
    if raw[:2] != b"\x1f\x8b" and raw[257:262] != b"ustar" and raw[:3] not in (b"BZh", b"\xfd7z"):
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
            return [(m.name.removeprefix("./"), archive.extractfile(m).read())  # type: ignore[union-attr]
                    for m in archive.getmembers() if m.isfile()]
    except (tarfile.TarError, OSError, EOFError):
        return None


def _one_file(path: str, raw: bytes | OSError, expectations: Expectations) -> tuple[FileResult, Evidence | None]:
    if isinstance(raw, OSError):
        kind = "missing" if isinstance(raw, FileNotFoundError) else "unreadable"
        return FileResult(path, kind, False, f"cannot read file: {raw.strerror or raw}"), None
    if not raw.strip():
        return FileResult(path, "empty", False, "empty file; " + _UNKNOWN), None
    if b"\x00" in raw[:4096]:
        return FileResult(path, "unknown", False, "binary file; " + _UNKNOWN), None
    text = raw.decode("utf-8", errors="replace")
    if host_evidence.MARKER in text:
        return _host_evidence(path, text, expectations)
    kind = detect_kind(text)
    if kind == "unknown":
        for na_kind, pattern, what in _NOT_APPLICABLE:
            if pattern.search(text):
                return FileResult(path, na_kind, True, f"{what}: recognised, not used in the analysis"), None
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


def _richest_section(kind: str, text: str) -> tuple[str, str]:
    """In a file holding several nvidia-smi outputs, the richest section: XML, then -q text, then the table."""
    start = text.find("<nvidia_smi_log")
    end = text.find("</nvidia_smi_log>")
    if start != -1 and end > start:
        decl = text.rfind("<?xml", 0, start)
        return "smi-xml", text[decl if decl != -1 else start:end + len("</nvidia_smi_log>")]
    marker = text.find("==============NVSMI LOG==============")
    if marker != -1 and kind != "smi-text":
        return "smi-text", text[marker:]
    return kind, text


def _host_evidence(path: str, text: str, expectations: Expectations) -> tuple[FileResult, Evidence | None]:
    """A `gpunode collect` gpunode-evidence.txt: the facts + evidence verify-gpu reads, analysed the same way."""
    try:
        evidence = host_evidence.evidence_from_output(text, expectations)
    except Exception as exc:  # a truncated or edited file must not end diagnose with a traceback
        return FileResult(path, "gpunode-evidence", False, f"could not parse gpunode facts ({exc!r})"), None
    findings = analyze(evidence)
    gpus = len(evidence.pci_gpus or [])
    return FileResult(path, "gpunode-evidence", True, f"gpunode facts + GPU evidence ({gpus} NVIDIA GPU(s) on PCI)",
                      evidence.smi, evidence.pci_devices, findings), evidence


def _read(kind: str, text: str, evidence: Evidence) -> tuple[str, SmiReport | None]:
    """Fill evidence from text of the given kind; return a one-line description."""
    if kind in _SMI_PARSERS:
        kind, text = _richest_section(kind, text)
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
                                        evidence.kernel_log, evidence.dkms_status, evidence.running_kernel))


def _merge_into(combined: Evidence, evidence: Evidence) -> None:
    report = evidence.smi
    if report is not None and (combined.smi is None or _better(report, combined.smi)):
        combined.smi = report
    if evidence.smi_error:
        combined.smi_error = "\n".join(t for t in (combined.smi_error, evidence.smi_error) if t)
    if evidence.kernel_log:
        combined.kernel_log = "\n".join(t for t in (combined.kernel_log, evidence.kernel_log) if t)
    for name in ("dkms_status", "running_kernel", "nouveau_loaded", "fabricmanager"):
        if getattr(evidence, name) is not None:
            setattr(combined, name, getattr(evidence, name))
    if evidence.pci_devices is not None:
        known = {(d.slot, d.device_id) for d in combined.pci_devices or []}
        new = [d for d in evidence.pci_devices if (d.slot, d.device_id) not in known]
        combined.pci_devices = [*(combined.pci_devices or []), *new]


def _better(new: SmiReport, old: SmiReport) -> bool:
    return (_REPORT_RANK[new.source_kind], -len(new.gpus)) < (_REPORT_RANK[old.source_kind], -len(old.gpus))
