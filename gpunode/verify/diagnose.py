"""diagnose_files(): detect, parse and analyse capture files, per file and combined."""

from __future__ import annotations

import gzip
import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.parsers.lspci import PciDevice
from gpunode.parsers.model import Finding, SmiReport
from gpunode.verify import host_evidence
from gpunode.verify.captures.blocks import without_prompts
from gpunode.verify.captures.cuda_samples_read import is_own
from gpunode.verify.captures.expected import floor_missing, nccl_missing, rejudge_nccl, without_moot
from gpunode.verify.captures.file_reader import FileRead, read_text
from gpunode.verify.captures.gpu_merge import merge_reports
from gpunode.verify.captures.gpus_seen import gpus_seen, matrix_gpus
from gpunode.verify.captures.not_applicable import NOT_APPLICABLE_KINDS, not_applicable_kind
from gpunode.verify.captures.units import FailedUnit, fabric_context, unit_findings
from gpunode.verify.checks.analyze import analyze, is_healthy
from gpunode.verify.evidence import Evidence, Expectations

__all__ = ["NOT_APPLICABLE_KINDS", "DiagnoseResult", "FileResult", "diagnose_files"]
_ACCEPTS = ("nvidia-smi -q -x / -q / plain table (or a fragment) / --query-gpu CSV / -L, lspci (-nn, -vv), a "
            "kernel log (dmesg, journalctl -k, syslog), captured nvidia-smi/docker/podman/containerd error output, "
            "a `gpunode collect` bundle (.tar.gz) or a folder of these, also several of them pasted in one file; "
            "benchmark output: dcgmi diag (table or -j), nccl-tests (with NCCL_DEBUG=INFO lines), nvbandwidth, the "
            "CUDA samples bandwidthTest and p2pBandwidthLatencyTest")
_CAPTURE_INSTEAD = ("capture instead, on the node: `nvidia-smi -q -x` (or plain `nvidia-smi`), `dmesg -T | grep -iE "
                    "'nvrm|xid|nvidia'` (or `journalctl -k -b`), `lspci -nn -vv -d 10de:`, or all of them at once "
                    "with `gpunode collect HOST`")
_UNKNOWN = "not a recognised capture; expected " + _ACCEPTS
_NO_VERDICT = ("a benchmark is judged against the published reference for its GPU model and count "
               "(gpunode/parsers/catalogs); without one there is no verdict on its bandwidth")




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
    blocks: list[str] = field(default_factory=list)  # the kind of every block, in order
    evidence: bool = False  # whether anything in it speaks about a GPU's health
    partial: list[str] = field(default_factory=list)  # what a partial capture lacks
    kernel_lines: int = 0
    nvidia_lines: int = 0
    reports: list[SmiReport] = field(default_factory=list, repr=False)
    seen: list[str] = field(default_factory=list)  # GPUs named outside nvidia-smi output (kernel log, lspci)
    # other vendors' / devices' messages (amdgpu, i915, rocm-smi, EDAC/MCE, NVMe, NICs): what -> (lines, samples)
    foreign: dict[str, tuple[int, list[str]]] = field(default_factory=dict, repr=False)
    units: list[FailedUnit] = field(default_factory=list, repr=False)
    fabric: str = "unknown"

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "kind": self.kind,
            "ok": self.ok,
            "message": self.message,
            "blocks": list(self.blocks),
            "evidence": self.evidence,
            "partial": list(self.partial),
            "report": self.report.to_dict() if self.report else None,
            "pci_devices": [d._asdict() for d in self.pci_devices] if self.pci_devices is not None else None,
            "findings": [f.to_dict() for f in self.findings],
            "not_nvidia": {what: count for what, (count, _) in self.foreign.items()},
        }


@dataclass
class DiagnoseResult:
    """Per-file results plus the analysis of all evidence combined."""

    files: list[FileResult]
    findings: list[Finding]
    combined: SmiReport | None = None

    @property
    def unreadable(self) -> list[FileResult]:
        """Files that were not understood (unknown, binary, empty, missing, unreadable, parse error)."""
        return [f for f in self.files if not f.ok]

    @property
    def has_evidence(self) -> bool:
        """Whether any input speaks about a GPU's health (a GPU listed, an NVIDIA kernel line, an error)."""
        return bool(self.findings) or any(f.evidence for f in self.files)

    @property
    def partial(self) -> list[str]:
        """What partial captures lack (GPU sections fewer than attached, a table cut off)."""
        return [f"{Path(f.path).name} lacks {item}" for f in self.files for item in f.partial]

    @property
    def healthy(self) -> bool | None:
        """False with a critical finding; None (unknown) when any input was not understood, nothing spoke about a
        GPU, or a capture was partial; True only when every file was understood, complete, and nothing is
        critical."""
        if not is_healthy(self.findings):
            return False
        if self.unreadable or not self.has_evidence or self.partial:
            return None
        return True

    @property
    def not_nvidia(self) -> dict[str, tuple[int, list[str]]]:
        """Other vendors' and devices' messages the inputs hold (never NVIDIA evidence): what -> (lines, samples)."""
        seen: dict[str, tuple[int, list[str]]] = {}
        for result in self.files:
            for what, (count, samples) in result.foreign.items():
                old = seen.get(what, (0, []))
                seen[what] = (old[0] + count, (old[1] + samples)[:2])
        return seen

    @property
    def verdict(self) -> str:
        if self.healthy is None and not self.unreadable and not self.has_evidence:
            return "not-nvidia" if self.not_nvidia else "no-evidence"
        return {True: "healthy", False: "unhealthy", None: "unknown"}[self.healthy]

    @property
    def gpu_count(self) -> int:
        """GPUs the inputs show: nvidia-smi's, else those kernel messages and lspci name by PCI address."""
        if self.combined and self.combined.gpus:
            return len(self.combined.gpus)
        return len({ident for f in self.files for ident in f.seen})

    @property
    def report(self) -> SmiReport | None:
        """Every GPU of every file's nvidia-smi output, merged by identity (richest source first)."""
        return self.combined

    def saw(self) -> str:
        """What the inputs held: kinds of blocks, GPUs, kernel log lines."""
        kinds: dict[str, int] = {}
        for result in self.files:
            for kind in result.blocks or [result.kind]:
                kinds[kind] = kinds.get(kind, 0) + 1
        blocks = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kinds.items()) or "none"
        gpus = self.gpu_count
        samples = sum(g.samples for g in self.combined.gpus) if self.combined else 0
        lines = sum(f.kernel_lines for f in self.files)
        nvidia = sum(f.nvidia_lines for f in self.files)
        sample_note = f" ({samples} samples)" if samples > gpus else ""
        return (f"{sum(kinds.values())} block(s): {blocks}; {gpus} GPU(s){sample_note}; {lines} kernel log "
                f"message(s), {nvidia} about NVIDIA")

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
            "saw": self.saw(),
            "partial": self.partial,
        }

    def render_text(self) -> str:
        """Human-readable report."""
        lines = [f"Files ({len(self.files)}):"]
        for result in self.files:
            mark = ("n/a" if result.kind in NOT_APPLICABLE_KINDS else "ok ") if result.ok else "ERR"
            said = result.message if result.message.startswith(f"{result.kind}: ") else \
                f"{result.kind}: {result.message}"  # a file of several blocks names each block's kind itself
            lines.append(f"  [{mark}] {result.path}: {said}")
        lines += ["", f"Saw: {self.saw()}", ""]
        if not self.findings:
            lines.append("Findings: none")
        else:
            lines.append(f"Findings ({len(self.findings)}):")
            for finding in self.findings:
                where = f" [{finding.gpu}]" if finding.gpu else ""
                lines.append(f"  {finding.severity.upper():8} {finding.id}{where}: {finding.summary}")
                lines.append(f"           evidence: {finding.evidence}")
                lines.append(f"           remedy:   {finding.remedy}")
        lines += ["", self._result_line()]
        return "\n".join(lines) + "\n"

    def _result_line(self) -> str:
        critical = sum(1 for f in self.findings if f.severity == "critical")
        warnings = sum(1 for f in self.findings if f.severity == "warning")
        counts = f"({critical} critical, {warnings} warning)"
        if self.healthy is not None:
            return f"Result: {'HEALTHY' if self.healthy else 'UNHEALTHY'} {counts}"
        if self.unreadable:
            missing = [f for f in self.unreadable if f.kind in ("missing", "unreadable")]
            if len(missing) == len(self.unreadable):  # no content to judge: say so, not "not understood"
                names = "; ".join(f"{f.path}: {f.message}" for f in missing)
                return f"Result: UNKNOWN {counts}: {names} (check the path)"
            names = ", ".join(f.path for f in self.unreadable)
            return f"Result: UNKNOWN {counts}: not understood: {names}. diagnose reads {_ACCEPTS}"
        if not self.has_evidence and self.not_nvidia:
            seen = "; ".join(f"{what}: {count} line(s), e.g. {samples[0][:160]!r}"
                             for what, (count, samples) in self.not_nvidia.items())
            return (f"Result: NOT NVIDIA {counts}: this is not about an NVIDIA GPU: the input holds only other "
                    f"vendors' or devices' messages ({seen}) and nothing NVIDIA's; diagnose reads NVIDIA GPUs "
                    f"only: {_CAPTURE_INSTEAD}")
        if not self.has_evidence:
            return (f"Result: NO EVIDENCE {counts}: nothing in the input speaks about a GPU's health (no GPU in "
                    f"nvidia-smi output, no NVIDIA kernel message, no error message, no PCI scan); {_CAPTURE_INSTEAD}")
        benchmark = all("no verdict" in item or "--expect-" in item for item in self.partial)
        return (f"Result: UNKNOWN {counts}: partial capture: {'; '.join(self.partial)}; "
                f"{_NO_VERDICT if benchmark else _CAPTURE_INSTEAD}")


def diagnose_files(paths: list[Path], expectations: Expectations | None = None) -> DiagnoseResult:
    """Analyse each file alone, then all of them together as one host."""
    files: list[FileResult] = []
    combined = Evidence(expectations=expectations or Expectations())
    reports: list[SmiReport] = []
    for name, raw in _inputs([Path(p) for p in paths]):
        result, evidence = _one_file(name, raw, combined.expectations)
        files.append(result)
        reports += result.reports
        if evidence is not None:
            _merge_into(combined, evidence)
    combined.smi = merge_reports(reports) or combined.smi
    found = rejudge_nccl(analyze(combined), combined.nccl_tests, combined.expectations) if _has_any(combined) else []
    return DiagnoseResult(files, without_moot(_with(found, [f for r in files for f in r.findings if _read_here(f)],
                                                    _combined_units(files, combined))), combined.smi)


_READ_IDS = frozenset({"nvlink-down", "nvlink-errors"})  # findings read from a capture, not by analyze()


def _read_here(finding: Finding) -> bool:
    """A finding read from a capture (link states, CUDA samples, NCCL transports), not made by analyze()."""
    return finding.id in _READ_IDS or is_own(finding)


def _combined_units(files: list[FileResult], combined: Evidence) -> list[Finding]:
    """Failed units of every file, judged with what all files say about NVSwitches."""
    units = list({u.unit: u for r in files for u in r.units}.values())
    if not units:
        return []
    contexts = {r.fabric for r in files} | {fabric_context(combined.smi, len(combined.nvswitches), "")}
    context = next((c for c in ("nvswitch", "none") if c in contexts), "unknown")
    return unit_findings(units, context, combined.smi)


def _with(findings: list[Finding], *more: list[Finding]) -> list[Finding]:
    """findings and more, without repeats, critical first."""
    kept = list(findings)
    seen = {(f.id, f.gpu, f.summary) for f in findings}
    for finding in (f for group in more for f in group):
        if (finding.id, finding.gpu, finding.summary) not in seen:
            seen.add((finding.id, finding.gpu, finding.summary))
            kept.append(finding)
    rank = {"critical": 0, "warning": 1, "ok": 2}
    return sorted(kept, key=lambda f: rank[f.severity])


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
            found.append((str(path), _gunzip(raw)))
        else:
            found += [(f"{path}:{name}", data) for name, data in members]
    return found


def _gunzip(raw: bytes) -> bytes:
    """The text of a gzip file that is not a tar archive (nvidia-bug-report.log.gz), else raw unchanged."""
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            return stream.read(256 * 1024 * 1024)
    except (OSError, EOFError):
        return raw


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


def _from_utf16(raw: bytes) -> bytes:
    """UTF-16 text as UTF-8: what Windows PowerShell 5's `nvidia-smi > out.txt` (and Out-File) writes, with a byte
    order mark, or without one (every other byte NUL in ASCII text). Anything else is returned unchanged."""
    head = raw[:512]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encoding = "utf-16"
    elif len(head) >= 8 and head[1::2].count(0) >= len(head) // 2 * 0.9 and head[0::2].count(0) == 0:
        encoding = "utf-16-le"
    else:
        return raw
    try:
        return raw.decode(encoding).encode("utf-8")
    except UnicodeDecodeError:
        return raw


def _one_file(path: str, raw: bytes | OSError, expectations: Expectations) -> tuple[FileResult, Evidence | None]:
    if isinstance(raw, OSError):
        kind = "missing" if isinstance(raw, FileNotFoundError) else "unreadable"
        return FileResult(path, kind, False, f"cannot read file: {raw.strerror or raw}"), None
    raw = _from_utf16(raw)
    if not raw.strip():
        return FileResult(path, "empty", False, "empty file; " + _UNKNOWN), None
    if b"\x00" in raw[:4096]:
        return FileResult(path, "unknown", False, "binary file; " + _UNKNOWN), None
    text = raw.decode("utf-8", errors="replace")
    if host_evidence.MARKER in text:
        return _host_evidence(path, text, expectations)
    try:
        read = read_text(text, expectations)
    except Exception as exc:  # one odd capture must not end diagnose with a traceback
        return FileResult(path, "unknown", False, f"could not read this file ({exc!r}); please report it with the "
                          "file attached"), None
    if not read.blocks or (not read.understood and not read.failed):
        na = not_applicable_kind(text) or not_applicable_kind(without_prompts(text))
        if na is not None:
            return FileResult(path, na[0], True, f"{na[1]}: recognised, not used in the analysis",
                              seen=sorted(matrix_gpus(without_prompts(text)))), None
        return FileResult(path, "unknown", False, _UNKNOWN), None
    result, evidence = _file_result(path, read)
    if "smi-topo" in result.blocks:  # a topology matrix names its GPUs, though it says nothing of their health
        result.seen = sorted(set(result.seen) | matrix_gpus(without_prompts(text)))
    return result, evidence


def _file_result(path: str, read: FileRead) -> tuple[FileResult, Evidence | None]:
    kind = read.kind
    kinds = [b.kind for b in read.blocks]
    if not read.understood:
        failed = read.failed
        message = failed[0].message if failed else _UNKNOWN
        return FileResult(path, failed[0].kind if failed else kind, False, message, blocks=kinds), None
    evidence = read.evidence
    analysed = analyze(evidence) if _has_any(evidence) else []
    findings = without_moot(_with(rejudge_nccl(analysed, evidence.nccl_tests, evidence.expectations), read.findings,
                                  unit_findings(read.units, read.fabric, evidence.smi)))
    messages = [f"{b.kind}: {b.message}" if len(read.blocks) > 1 else b.message for b in read.blocks if b.ok]
    partial = list(evidence.smi.missing) if evidence.smi else []
    partial += _no_verdict(findings, evidence)
    if any(f.id == "dcgm-diag-skipped" for f in findings):
        partial.append("a DCGM diagnostic that tested something (every result of this dcgmi diag run was Skip: "
                       "`dcgmi diag -r N -v` on the node says why)")
    if any(f.id == "nvbandwidth-test-failed" for f in findings):
        partial.append("the rest of an nvbandwidth run that stopped in a testcase (its copies were not all measured)")
    return FileResult(path, kind, True, "; ".join(messages), evidence.smi, evidence.pci_devices, findings, kinds,
                      read.has_evidence or bool(findings), partial, read.kernel_lines, read.nvidia_lines,
                      read.reports, sorted(gpus_seen(evidence)), read.foreign, read.units, read.fabric), evidence


_NO_FLOOR = {"nvbandwidth-no-reference": "nvbandwidth", "bandwidthtest-no-reference": "bandwidthTest",
             "dcgm-pcie-no-reference": "dcgmi diag PCIe"}


def _no_verdict(findings: list[Finding], evidence: Evidence) -> list[str]:
    """What a benchmark with nothing to compare to lacks (a benchmark without a reference is no verdict)."""
    missing = [nccl_missing(evidence.nccl_tests, evidence.expectations)
               for f in findings[:1] if any(g.id == "nccl-no-reference" for g in findings)]
    missing += [floor_missing(_NO_FLOOR[f.id], f, evidence.expectations) for f in findings if f.id in _NO_FLOOR]
    return list(dict.fromkeys(missing))


def _host_evidence(path: str, text: str, expectations: Expectations) -> tuple[FileResult, Evidence | None]:
    """A `gpunode collect` gpunode-evidence.txt: the facts + evidence verify-gpu reads, analysed the same way."""
    try:
        evidence = host_evidence.evidence_from_output(text, expectations)
    except Exception as exc:  # a truncated or edited file must not end diagnose with a traceback
        return FileResult(path, "gpunode-evidence", False, f"could not parse gpunode facts ({exc!r})"), None
    findings = analyze(evidence)
    gpus = len(evidence.pci_gpus or [])
    return FileResult(path, "gpunode-evidence", True, f"gpunode facts + GPU evidence ({gpus} NVIDIA GPU(s) on PCI)",
                      evidence.smi, evidence.pci_devices, findings, ["gpunode-evidence"], True,
                      reports=[evidence.smi] if evidence.smi else []), evidence


def _has_any(evidence: Evidence) -> bool:
    return any(x is not None for x in (evidence.smi, evidence.smi_error, evidence.pci_devices, evidence.link_states,
                                        evidence.dcgmi, evidence.nccl_tests, evidence.nvbandwidth, evidence.kernel_log,
                                        evidence.dkms_status, evidence.running_kernel))


def _join_texts(combined: Evidence, evidence: Evidence, names: tuple[str, ...]) -> None:
    """Append evidence's text fields (dcgmi tables, nccl-tests runs) to combined's."""
    for name in names:
        if getattr(evidence, name):
            setattr(combined, name, "\n".join(t for t in (getattr(combined, name), getattr(evidence, name)) if t))


def _merge_into(combined: Evidence, evidence: Evidence) -> None:
    _join_texts(combined, evidence, ("dcgmi", "nccl_tests", "nvbandwidth"))
    if evidence.link_states:
        combined.link_states = [*(combined.link_states or []), *evidence.link_states]
    if evidence.smi_error:
        combined.smi_error = "\n".join(t for t in (combined.smi_error, evidence.smi_error) if t)
    if evidence.kernel_log:
        combined.kernel_log = "\n".join(t for t in (combined.kernel_log, evidence.kernel_log) if t)
    # every host fact a check reads (a collect bundle's gpunode-evidence.txt has them all: its findings and remedies
    # must be verify-gpu's, issue 37), the last file that knows one winning
    for name in ("dkms_status", "running_kernel", "running_headers", "running_module", "precompiled_modules",
                 "next_boot_kernel", "next_boot_headers", "nouveau_loaded", "fabricmanager"):
        if getattr(evidence, name) is not None:
            setattr(combined, name, getattr(evidence, name))
    if evidence.pci_devices is not None:
        known = {(d.slot, d.device_id) for d in combined.pci_devices or []}
        new = [d for d in evidence.pci_devices if (d.slot, d.device_id) not in known]
        combined.pci_devices = [*(combined.pci_devices or []), *new]
