"""Read one capture's text block by block into Evidence, and say what was seen."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpunode.parsers.dcgmi import dcgmi_findings
from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.errors_text import classify_errors
from gpunode.parsers.kernel_lines import kernel_messages
from gpunode.parsers.kernel_log import scan_kernel_log
from gpunode.parsers.lspci import PciDevice, parse_lspci
from gpunode.parsers.lspci_vv import LinkState, parse_lspci_vv
from gpunode.parsers.model import Finding, SmiReport
from gpunode.parsers.nccl_tests import parse_nccl_tests, with_program_line
from gpunode.parsers.nvbandwidth import parse_nvbandwidth
from gpunode.parsers.smi_csv import csv_query_kind, parse_smi_csv
from gpunode.parsers.smi_list import gpus_listed_in, parse_smi_list
from gpunode.parsers.smi_nvlink import nvlink_findings, parse_nvlink
from gpunode.parsers.smi_table import apply_inforom_warnings, parse_smi_table
from gpunode.parsers.smi_text import parse_smi_text
from gpunode.parsers.smi_xml import parse_smi_xml
from gpunode.parsers.vendor_lines import foreign, is_nvidia
from gpunode.verify.captures.blocks import Block, split_blocks, undisguise
from gpunode.verify.captures.cuda_samples_read import (
    dcgm_pcie_findings,
    nccl_transport_findings,
    read_bandwidth_test,
    read_nccl_debug,
    read_p2p_test,
)
from gpunode.verify.captures.gpu_merge import merge_reports
from gpunode.verify.captures.not_applicable import not_applicable_kind
from gpunode.verify.captures.units import FailedUnit, fabric_context, failed_units
from gpunode.verify.evidence import Evidence, Expectations

SMI_PARSERS = {"smi-xml": parse_smi_xml, "smi-text": parse_smi_text, "smi-table": parse_smi_table,
               "smi-csv": parse_smi_csv, "smi-list": parse_smi_list}
# The kind a file is named by when it holds several: the richest evidence first.
_PRIMARY = ("smi-xml", "smi-text", "smi-csv", "smi-table", "smi-list", "dcgmi-diag", "nccl-tests", "nvbandwidth",
            "cuda-p2p", "cuda-bandwidthtest", "nccl-debug",
            "lspci-vv", "lspci", "error-text", "kernel-log", "unit-failure", "other-vendor")
_FOREIGN_SAMPLES = 2  # lines quoted per kind of foreign message


@dataclass
class BlockResult:
    """One block of a file: its kind, whether it was understood, and a one-line description."""

    kind: str
    ok: bool
    message: str


@dataclass
class FileRead:
    """Everything read from one file."""

    evidence: Evidence
    reports: list[SmiReport] = field(default_factory=list)
    blocks: list[BlockResult] = field(default_factory=list)
    kernel_lines: int = 0
    nvidia_lines: int = 0
    # other vendors' / devices' messages: what they are -> (lines, first lines); never NVIDIA evidence
    foreign: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)  # read here, not by analyze() (nvlink link states)
    units: list[FailedUnit] = field(default_factory=list)  # GPU-stack systemd units the text says failed
    fabric: str = "unknown"  # whether the system has NVSwitches: nvswitch | none | unknown (units.fabric_context)

    @property
    def kind(self) -> str:
        """The file's main kind: its richest understood block, else its first block's kind."""
        kinds = [b.kind for b in self.blocks if b.ok]
        for kind in _PRIMARY:
            if kind in kinds:
                return kind
        return kinds[0] if kinds else (self.blocks[0].kind if self.blocks else "unknown")

    @property
    def failed(self) -> list[BlockResult]:
        """Blocks of a recognised kind that could not be parsed."""
        return [b for b in self.blocks if not b.ok and b.kind != "unknown"]

    @property
    def understood(self) -> bool:
        return any(b.ok for b in self.blocks) and not self.failed

    @property
    def has_evidence(self) -> bool:
        """Whether anything read speaks about a GPU: a GPU in nvidia-smi output, an NVIDIA kernel message, a PCI
        scan, a link state or an error message."""
        ev = self.evidence
        return bool((ev.smi is not None and ev.smi.gpus) or self.nvidia_lines or ev.smi_error
                    or ev.pci_devices is not None or ev.link_states or ev.dcgmi or ev.nccl_tests or ev.nvbandwidth
                    or self.findings or self.units)


def read_text(text: str, expectations: Expectations) -> FileRead:
    """Split text into blocks, read each on its own, and merge their evidence (GPUs by identity)."""
    result = FileRead(Evidence(expectations=expectations))
    errors: list[str] = []
    kernel: list[str] = []
    pci: list[PciDevice] | None = None
    links: list[LinkState] = []
    dcgmi: list[str] = []
    for block in split_blocks(text):
        try:
            if reader := _BENCHMARK_READERS.get(block.kind):  # benchmark output: its text kept for the findings
                result.blocks.append(BlockResult(*reader(block.text, result)))
                continue
            message, found = _read_block(block, result, errors, kernel, links, dcgmi)
        except SmiParseError as exc:
            result.blocks.append(BlockResult(block.kind, False, str(exc)))
            continue
        except Exception as exc:  # one odd block must not end diagnose with a traceback
            result.blocks.append(BlockResult(block.kind, False, f"could not parse this {block.kind} block "
                                             f"({exc!r}); please report it with the file attached"))
            continue
        if found is not None:
            pci = [*(pci or []), *(d for d in found if d.slot not in {p.slot for p in pci or []})]
        result.blocks.append(BlockResult(*message))
    plain = undisguise(text)
    _safety_net(plain, errors)
    for report in result.reports:
        apply_inforom_warnings(report.gpus, plain)
    ev = result.evidence
    ev.smi = merge_reports(result.reports)
    ev.smi_error = "\n".join(errors) or None
    ev.kernel_log = "\n".join(kernel) or None
    ev.pci_devices = pci
    ev.link_states = links or None
    ev.dcgmi = "\n".join(dcgmi) or None
    if ev.nccl_tests:
        ev.nccl_tests = with_program_line(ev.nccl_tests, plain)
        _name_collective(result.blocks, parse_nccl_tests(ev.nccl_tests).collective)
    if ev.kernel_log:
        messages = kernel_messages(ev.kernel_log)
        result.kernel_lines = len(messages)
        result.nvidia_lines = sum(1 for m in messages if is_nvidia(m.text))
    result.foreign = foreign_lines(plain)
    result.units = failed_units(plain)
    result.fabric = fabric_context(ev.smi, len(ev.nvswitches), plain)
    return result


def _name_collective(blocks: list[BlockResult], collective: str | None) -> None:
    """An nccl-tests block whose program line landed in a block of its own (a prompt line): its description names
    the collective the findings judge, not "collective not named"."""
    for block in blocks:
        if collective and block.kind == "nccl-tests" and block.message.startswith("collective not named"):
            block.message = block.message.replace("collective not named", collective, 1)


def foreign_lines(text: str) -> dict[str, tuple[int, list[str]]]:
    """Lines of other vendors and devices (amdgpu, i915, rocm-smi, EDAC/MCE, NVMe, NICs), by what they are."""
    found: dict[str, tuple[int, list[str]]] = {}
    for line in text.split("\n"):
        attribution = foreign(line) if line.strip() else None
        if attribution is None:
            continue
        key = f"{attribution.what} ({attribution.vendor})"
        count, samples = found.get(key, (0, []))
        found[key] = (count + 1, samples if len(samples) >= _FOREIGN_SAMPLES else [*samples, line.strip()])
    return found


def _safety_net(text: str, errors: list[str]) -> None:
    """Error messages inside blocks of another kind (a container error pasted into a table's block)."""
    seen = {m.id for m in classify_errors("\n".join(errors))} if errors else set()
    extra = [m.line for m in classify_errors(text) if m.context != "kernel" and m.id not in seen]
    errors.extend(dict.fromkeys(extra))


def _read_block(block: Block, read: FileRead, errors: list[str], kernel: list[str],
                links: list[LinkState], dcgmi: list[str]) -> tuple[tuple[str, bool, str], list[PciDevice] | None]:
    """((kind, ok, message), PCI devices found) for one block; evidence goes into the lists."""
    kind, text, reports = block.kind, block.text, read.reports
    if kind == "smi-csv" and csv_query_kind(text) != "gpu":
        rows = sum(1 for line in text.splitlines()[1:] if line.strip())
        return (kind, True, f"nvidia-smi --query-{csv_query_kind(text)} CSV with {rows} row(s); it lists no GPUs "
                            "and is not used in the analysis"), None
    if kind in SMI_PARSERS:
        report = SMI_PARSERS[kind](text)
        reports.append(report)
        return (kind, True, _describe(report)), None
    if kind == "lspci":
        devices = parse_lspci(text)
        gpus = sum(1 for d in devices if not d.is_nvswitch)
        return (kind, True, f"{gpus} NVIDIA GPU(s), {len(devices) - gpus} NVSwitch(es)"), devices
    if kind == "lspci-vv":
        states, devices = parse_lspci_vv(text)
        links.extend(states)
        return (kind, True, f"lspci -vv: link state of {len(states)} NVIDIA device(s)"), devices
    if kind == "kernel-log":
        kernel.append(text)
        scan = scan_kernel_log(text)
        counts = ", ".join(f"Xid {code} x{n}" for code, n in sorted(scan.xid_counts().items())) or "no Xid"
        return (kind, True, f"{counts}; {len(scan.lost)} fallen-off-the-bus line(s)"), None
    if kind == "dcgmi-diag":
        dcgmi.append(text)
        read.findings.extend(dcgm_pcie_findings(text, read))
        tests, found = dcgmi_findings(text)
        return (kind, True, f"dcgmi diag: {tests} test result(s), {len(found)} finding(s)"), None
    if kind == "error-text":
        errors.append(text)
        return (kind, True, "captured nvidia-smi/NVML/docker error output"), None
    if kind == "unit-failure":
        return (kind, True, "failed systemd unit(s): " + ", ".join(u.unit for u in failed_units(text))), None
    if kind == "other-vendor":
        foreign = foreign_lines(text)
        return (kind, True, "not NVIDIA's: " + "; ".join(f"{what} x{count}" for what, (count, _) in
                                                         foreign.items())), None
    return _not_applicable(text, read), None


def _read_nccl(text: str, read: FileRead) -> tuple[str, bool, str]:
    """Keep one nccl-tests run's text in the evidence, name the transports its NCCL_DEBUG=INFO lines show, and
    describe it."""
    ev = read.evidence
    ev.nccl_tests = f"{ev.nccl_tests}\n{text}" if ev.nccl_tests else text
    run = parse_nccl_tests(text)
    read.findings.extend(nccl_transport_findings(text, run.collective or "nccl-tests"))
    best = run.max_busbw()
    return ("nccl-tests", True, f"{run.collective or 'collective not named'}: {run.n_ranks} rank(s), "
                                f"{len(run.rows)} size(s)" + (f", max busbw {best:g} GB/s" if best is not None else ""))


def _read_nvbandwidth(text: str, read: FileRead) -> tuple[str, bool, str]:
    """Keep one nvbandwidth output's text in the evidence (blank lines kept: they end its matrices), and describe
    it."""
    ev = read.evidence
    ev.nvbandwidth = f"{ev.nvbandwidth}\n\n{text}" if ev.nvbandwidth else text
    run = parse_nvbandwidth(text)
    tests = ", ".join(dict.fromkeys(m.testcase or "unnamed testcase" for m in run.matrices)) or "no matrix"
    return "nvbandwidth", True, f"{run.version or 'version not shown'}, {len(run.devices)} device line(s): {tests}"


_BENCHMARK_READERS: dict[str, Callable[[str, FileRead], tuple[str, bool, str]]] = {
    "nccl-tests": _read_nccl, "nvbandwidth": _read_nvbandwidth, "cuda-bandwidthtest": read_bandwidth_test,
    "cuda-p2p": read_p2p_test, "nccl-debug": read_nccl_debug}


def _not_applicable(text: str, read: FileRead) -> tuple[str, bool, str]:
    """A recognised block without health evidence (nvlink -s's GPU headings still name GPUs, its link states are
    read for health), else unknown."""
    na = not_applicable_kind(text)
    if na is not None and na[0] == "smi-nvlink":
        report = gpus_listed_in(text)
        if report.gpus:
            read.reports.append(report)
        gpus = parse_nvlink(text)
        found = nvlink_findings(gpus)
        read.findings.extend(found)
        inactive = sum(len(gpu.inactive) for gpu in gpus)
        return na[0], True, (f"{na[1]}: {len(gpus)} GPU(s), {sum(len(g.active) for g in gpus)} link(s) active, "
                             f"{inactive} inactive; {len(found)} finding(s)")
    if na is not None:
        return na[0], True, f"{na[1]}: recognised, not used in the analysis"
    return "unknown", False, "not a recognised capture"


def _describe(report: SmiReport) -> str:
    report = merge_reports([report]) or report
    names = sorted({g.name for g in report.gpus if g.name})
    message = (f"driver {report.driver_version or '?'}, CUDA {report.cuda_version or '?'}, "
               f"{report.gpu_count} GPU(s): {', '.join(names) or '?'}")
    if report.warnings:
        message += f" (warning: {'; '.join(report.warnings)})"
    return message
