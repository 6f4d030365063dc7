"""analyze(): run every check on the evidence of one host; is_healthy()."""

from __future__ import annotations

from gpunode.parsers.dcgmi import dcgmi_findings
from gpunode.parsers.errors_text import classify_errors
from gpunode.parsers.kernel_log import KernelScan, scan_kernel_log
from gpunode.parsers.lspci_vv import link_findings
from gpunode.parsers.model import Finding
from gpunode.parsers.nccl_findings import nccl_findings
from gpunode.parsers.nccl_tests import parse_nccl_tests
from gpunode.parsers.nvbandwidth import parse_nvbandwidth
from gpunode.parsers.nvbandwidth_findings import nvbandwidth_findings
from gpunode.verify.checks.catalogue import kernel_message_findings
from gpunode.verify.checks.driver import driver_checks
from gpunode.verify.checks.gpu import gpu_checks
from gpunode.verify.checks.host import host_checks
from gpunode.verify.checks.kernel import kernel_checks
from gpunode.verify.evidence import ContainerTest, Evidence, Expectations, FabricManagerState

__all__ = ["ContainerTest", "Evidence", "Expectations", "FabricManagerState", "analyze", "is_healthy"]

_RANK = {"critical": 0, "warning": 1, "ok": 2}


def analyze(evidence: Evidence) -> list[Finding]:
    """All findings for one host, critical first; one finding per id (evidence merged)."""
    errors = classify_errors(evidence.smi_error) if evidence.smi_error else []
    expect = evidence.expectations
    scan = KernelScan()
    for text in (evidence.kernel_log, evidence.smi_error):
        if text:
            scan.extend(scan_kernel_log(text))
    findings = [
        *driver_checks(evidence, errors, scan),
        *host_checks(evidence),
        *gpu_checks(evidence.smi),
        *kernel_checks(scan, errors),
        *kernel_message_findings("\n".join(t for t in (evidence.kernel_log, evidence.smi_error) if t), scan),
        *link_findings(evidence.link_states or []),
        *(dcgmi_findings(evidence.dcgmi)[1] if evidence.dcgmi else []),
        *(nccl_findings(parse_nccl_tests(evidence.nccl_tests), expect.expect_model, expect.expect_gpus)
          if evidence.nccl_tests else []),
        *(nvbandwidth_findings(parse_nvbandwidth(evidence.nvbandwidth), expect.expect_model, expect.expect_gpus)
          if evidence.nvbandwidth else []),
    ]
    if evidence.smi is not None and evidence.smi.gpus:  # nvidia-smi works: nouveau does not hold these GPUs
        findings = [Finding(f.id, "warning", f.summary, f.evidence + "; nvidia-smi still works", f.remedy, f.gpu)
                    if f.id == "nouveau-loaded" and f.severity == "critical" else f for f in findings]
    if any(f.id == "no-devices-found" for f in findings):  # its evidence quotes the RmInitAdapter lines already
        findings = [f for f in findings if f.id != "rm-init-failed"]  # (as kernel_checks decides for its own)
    return sorted(_merge(findings), key=lambda f: _RANK[f.severity])


def is_healthy(findings: list[Finding]) -> bool:
    """True when no finding is critical."""
    return not any(finding.severity == "critical" for finding in findings)


def _merge(findings: list[Finding]) -> list[Finding]:
    merged: dict[str, Finding] = {}
    for finding in findings:
        first = merged.get(finding.id)
        if first is None:
            merged[finding.id] = finding
            continue
        worse = finding if _RANK[finding.severity] < _RANK[first.severity] else first
        gpus = ", ".join(g for g in (first.gpu, finding.gpu) if g) or None
        merged[finding.id] = Finding(
            finding.id, worse.severity, worse.summary, f"{first.evidence}; {finding.evidence}",
            worse.remedy, gpus)
    return list(merged.values())
