"""`nvidia-smi nvlink -s` / `--status` and `nvidia-smi nvlink -e` read for health.

nvidia-smi is closed source: the forms are those of the real captures in tests/data/captures/nvlink/ (a heading
"GPU <n>: <name> (UUID: GPU-...)", then one indented line per link: "Link <n>: <speed> GB/s" or "Link <n>:
<inactive>" for -s; "Link <n>: Replay Errors: <n>", "Recovery Errors", "CRC Errors" for -e).
A link shown `<inactive>` carries no traffic. GPUs without NVLink (PCIe boards without a bridge) list every link
inactive, which is no fault; on an NVLink SKU (SXM/HGX boards: every link is wired to a peer or an NVSwitch) an
inactive link is one. A bridged PCIe board with some links active and others not has lost part of its bridge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.parsers.model import Finding, Severity

_HEADING = re.compile(r"^\s*GPU (?P<index>\d+): (?P<name>.+?)(?:\s+\(UUID: (?P<uuid>[^)]*)\))?\s*$")
_LINK = re.compile(r"^\s+Link (?P<link>\d+): (?P<state><inactive>|[\d.]+ [GM]B/s|[\w ]+Errors: \d+|.+)$")
_COUNTER = re.compile(r"^(?P<name>[\w ]+) Errors: (?P<value>\d+)$")
# Boards whose NVLinks are all wired on the board or baseboard (SXM modules, HGX/DGX, Grace superchips).
_NVLINK_SKU = re.compile(r"SXM|HGX|DGX|\bHBM3e?\b|\bG?B[23]00\b|\bGH200\b|\bH200\b(?! NVL)|\bH20\b|\bH800\b", re.I)


@dataclass
class NvlinkGpu:
    """One GPU of an nvlink listing: its links' states and error counters."""

    index: int
    name: str
    uuid: str | None
    active: list[int] = field(default_factory=list)
    inactive: list[int] = field(default_factory=list)
    errors: dict[int, dict[str, int]] = field(default_factory=dict)  # link -> {"Replay": n, "CRC": n, ...}

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name})"

    @property
    def nvlink_sku(self) -> bool:
        return _NVLINK_SKU.search(self.name) is not None


def is_nvlink_listing(text: str) -> bool:
    """True when text holds a GPU heading followed by its Link lines."""
    return re.search(r"^\s*GPU \d+: .*\n\s+Link \d+: ", text, re.M) is not None


def parse_nvlink(text: str) -> list[NvlinkGpu]:
    """Every GPU of an `nvidia-smi nvlink -s` / `-e` listing, with its link states and counters."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and not line.startswith(("\t", "   ")):
            uuid = heading.group("uuid")
            gpus.append(NvlinkGpu(int(heading.group("index")), heading.group("name").strip(),
                                  uuid if uuid and uuid.startswith("GPU-") else None))
            continue
        link = _LINK.match(line)
        if link is None or not gpus:
            continue
        _add_link(gpus[-1], int(link.group("link")), link.group("state").strip())
    return gpus


def _add_link(gpu: NvlinkGpu, number: int, state: str) -> None:
    counter = _COUNTER.match(state)
    if counter:
        gpu.errors.setdefault(number, {})[counter.group("name").strip()] = int(counter.group("value"))
    elif state == "<inactive>":
        gpu.inactive.append(number)
    elif state.endswith("B/s"):
        gpu.active.append(number)


def nvlink_findings(gpus: list[NvlinkGpu]) -> list[Finding]:
    """nvlink-down for inactive links on NVLink SKUs (critical) and on partly linked boards (warning)."""
    findings = []
    for gpu in gpus:
        if not gpu.inactive:
            continue
        links = ", ".join(str(n) for n in gpu.inactive)
        if gpu.nvlink_sku:
            severity: Severity = "critical"
            why = "an SXM/HGX GPU has every NVLink wired; these carry no traffic"
        elif gpu.active:
            severity, why = "warning", "other links of this GPU are up: part of its NVLink bridge is not"
        else:
            continue  # a board without NVLink (or without a bridge) lists all its links inactive
        findings.append(Finding(
            "nvlink-down", severity, f"NVLink link(s) {links} inactive on {gpu.label}",
            f"nvidia-smi nvlink -s: {gpu.label}: link(s) {links} <inactive>, {len(gpu.active)} active; {why}",
            "Links that are inactive carry no peer traffic (NCCL falls back to PCIe or fails): on NVSwitch "
            "systems check nvidia-fabricmanager runs and the GPU's fabric state is Completed (`nvidia-smi -q | grep "
            "-A2 Fabric`); reset the GPU or reboot, then `nvidia-smi nvlink -s` and `dcgmi diag -r 3`; a link that "
            "stays inactive points at the baseboard, the NVLink bridge or the GPU (reseat the bridge, RMA).",
            gpu.uuid or gpu.label))
    findings.extend(_error_findings(gpus))
    return findings


def _error_findings(gpus: list[NvlinkGpu]) -> list[Finding]:
    """nvlink-errors for links whose replay/recovery/CRC counters are not zero (nvlink -e)."""
    findings = []
    for gpu in gpus:
        counted = {link: {k: v for k, v in counters.items() if v} for link, counters in gpu.errors.items()}
        counted = {link: counters for link, counters in counted.items() if counters}
        if not counted:
            continue
        detail = "; ".join(f"link {link}: " + ", ".join(f"{k} {v}" for k, v in counters.items())
                           for link, counters in sorted(counted.items()))
        findings.append(Finding(
            "nvlink-errors", "warning", f"NVLink error counters are not zero on {gpu.label}",
            f"nvidia-smi nvlink -e: {detail}",
            "Replays and CRC errors are retried by the link but show a marginal connection; recovery errors mean "
            "the link retrained. Reset the counters (`nvidia-smi nvlink -r 0`), watch whether they grow under load "
            "(`nvidia-smi nvlink -e` again), and reseat the bridge or RMA the board if they do.",
            gpu.uuid or gpu.label))
    return findings
