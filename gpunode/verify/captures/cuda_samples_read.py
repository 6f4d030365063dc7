"""Read CUDA sample benchmark blocks (bandwidthTest, p2pBandwidthLatencyTest) and nccl-tests transport lines into
findings that name the GPU or pair, judged against the per-model floors the nvbandwidth judge uses."""

from __future__ import annotations

import re
from typing import Protocol

from gpunode.parsers import cuda_bandwidth_test, cuda_p2p_test
from gpunode.parsers.dcgm_pcie_bandwidth import dcgm_pcie_run
from gpunode.parsers.model import Finding
from gpunode.parsers.nccl_transport import failure_findings, parse_nccl_transport, transport_findings
from gpunode.parsers.nvbandwidth import NvbRun
from gpunode.parsers.nvbandwidth_findings import nvbandwidth_findings
from gpunode.verify.evidence import Evidence

# Findings these readers add (kept at the combined level of diagnose, like the link states read from a capture).
OWN_PREFIXES = ("p2p-", "bandwidthtest-", "p2ptest-", "dcgm-pcie-", "nccl-p2p-disabled", "nccl-no-p2p",
                "nccl-net-socket", "nccl-transport", "nccl-tests-failed")
_RUN_START = re.compile(r"^.*\[?CUDA Bandwidth Test\] - Starting", re.M)


class Read(Protocol):
    """What a reader writes to: the file's evidence (its expectations) and its findings."""

    evidence: Evidence
    findings: list[Finding]


def _as_own(found: list[Finding], prefix: str, program: str) -> list[Finding]:
    """The nvbandwidth judge's findings on a converted run, re-named for the program that measured it."""
    return [Finding(prefix + f.id.removeprefix("nvbandwidth-"), f.severity,
                    f.summary.replace("nvbandwidth on", f"{program} on"), f"{program}: {f.evidence}", f.remedy, f.gpu)
            for f in found]


def _judged(run: NvbRun, read: Read, prefix: str, program: str) -> list[Finding]:
    if not run.matrices:
        return []
    found = nvbandwidth_findings(run, read.evidence.expectations.expect_model)
    if prefix == "p2ptest-":  # the host-link floors do not apply to a peer-copy test: keep its pair verdicts only
        found = [f for f in found if "p2p" in f.id or f.id == "nvbandwidth-test-failed"]
    return _as_own(found, prefix, program)


def read_bandwidth_test(text: str, read: Read) -> tuple[str, bool, str]:
    """Each bandwidthTest run of a block (a pasted file can hold several, one per banner) judged on its own."""
    cuts = sorted({0, *(m.start() for m in _RUN_START.finditer(text)), len(text)})
    messages = []
    runs = [cuda_bandwidth_test.parse_bandwidth_test(text[start:end]) for start, end in zip(cuts, cuts[1:],
                                                                                             strict=False)]
    runs = [run for run in runs if run.results or run.devices]
    differ = _runs_differ(runs)
    read.findings.extend(differ)
    judged = []
    for run in runs:
        found = _judged(cuda_bandwidth_test.as_nvbandwidth(run), read, "bandwidthtest-", "bandwidthTest")
        if run.passed is False:
            found.append(Finding("bandwidthtest-failed", "critical", "bandwidthTest printed Result = FAIL",
                                 "Result = FAIL (bandwidthTest.cu:168)",
                                 "Run it again with --device=N per GPU and dcgmi diag -r 2 on the node."))
        judged.append(found)
        messages.append(cuda_bandwidth_test.describe(run))
    if differ and any(f.id == "bandwidthtest-ok" for found in judged for f in found):
        judged = [[_binding_not_link(f) for f in found] for found in judged]
    read.findings.extend(f for found in judged for f in found)
    return "cuda-bandwidthtest", True, " | ".join(messages)


def _binding_not_link(finding: Finding) -> Finding:
    """A slow run of a GPU another run of the same capture measured at its floor: the link is fine, the run was
    bound to the far CPU socket (a warning that says so, not a link fault)."""
    if finding.id not in ("bandwidthtest-pcie-low", "bandwidthtest-pcie-half"):
        return finding
    return Finding(finding.id, "warning", finding.summary.split("; about half")[0] + "; another run of this capture "
                   "meets the floor on the same GPU, so the link trains right: this run was bound to the far CPU "
                   "socket (NUMA)", finding.evidence, "Bind the test to the GPU's own socket (`nvidia-smi topo -m` "
                   "CPU Affinity, `numactl -N <node> -m <node>`).", finding.gpu)


def _runs_differ(runs: list[cuda_bandwidth_test.BandwidthTestRun]) -> list[Finding]:
    """The same GPU measured at under half its own best host-to-device speed in another run of the same capture
    (a run bound to the far CPU socket, a link that trains down under load)."""
    best: dict[str, list[float]] = {}
    for run in runs:
        name = next(iter(run.devices.values()), "device not shown")
        for result in run.results:
            if result.direction == "h2d" and result.memory == "PINNED" and result.best:
                best.setdefault(name, []).append(result.best)
    return [Finding("bandwidthtest-runs-differ", "warning",
                    f"{name}: host-to-device {min(values):g} GB/s in one bandwidthTest run and {max(values):g} GB/s "
                    f"in another of the same capture ({min(values) / max(values):.0%})",
                    "bandwidthTest Host to Device PINNED tables of each run",
                    "Bind the test to the GPU's own CPU socket (`nvidia-smi topo -m` CPU Affinity, `numactl -N <node> "
                    "-m <node>`); if a bound run is still slow, check the link: `lspci -vv` LnkSta against LnkCap.")
            for name, values in best.items() if len(values) > 1 and min(values) < 0.5 * max(values)]


def read_p2p_test(text: str, read: Read) -> tuple[str, bool, str]:
    """The pairs whose P2P copy does not beat the host-staged copy, and the enabled matrices against the floors."""
    run = cuda_p2p_test.parse_p2p_test(text)
    read.findings.extend(cuda_p2p_test.p2p_findings(run))
    read.findings.extend(_judged(cuda_p2p_test.as_nvbandwidth(run), read, "p2ptest-", "p2pBandwidthLatencyTest"))
    return "cuda-p2p", True, cuda_p2p_test.describe(run)


def dcgm_pcie_findings(text: str, read: Read) -> list[Finding]:
    """A dcgmi diag JSON's PCIe test bandwidths per GPU against the floor for the model (--expect-model: the JSON
    names no GPU model)."""
    return _judged(dcgm_pcie_run(text), read, "dcgm-pcie-", "dcgmi diag PCIe")


def read_nccl_debug(text: str, read: Read) -> tuple[str, bool, str]:
    """An NCCL_DEBUG=INFO log without a test table (a training job's, an excerpt): its transports and errors."""
    found = parse_nccl_transport(text)
    read.findings.extend(nccl_transport_findings(text, "NCCL"))
    used = ", ".join(f"{kind} x{count}" for kind, count in sorted(found.kinds.items())) or "no channel lines"
    hosts = f" on {len(found.hosts)} host(s)" if found.hosts else ""
    return "nccl-debug", True, f"NCCL_DEBUG=INFO log{hosts}: {used}"


def nccl_transport_findings(text: str, run_name: str) -> list[Finding]:
    """What the run's NCCL_DEBUG=INFO lines say about its transports (nothing when it has none)."""
    return failure_findings(text, run_name) + transport_findings(parse_nccl_transport(text), run_name)


def is_own(finding: Finding) -> bool:
    """Whether a finding came from these readers (kept when diagnose combines its files)."""
    return finding.id.startswith(OWN_PREFIXES)
