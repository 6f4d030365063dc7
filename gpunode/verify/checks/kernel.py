"""Kernel-log checks: one finding per Xid code, and lost GPUs."""

from __future__ import annotations

from collections.abc import Iterable

from gpunode.parsers.errors_text import ErrorMatch
from gpunode.parsers.kernel_log import XID_DOC_URL, KernelScan, XidEvent, xid_info
from gpunode.parsers.model import Finding

_LOST_REMEDY = (
    "Reboot the node (NVIDIA resolution: RESTART_BM). Review kernel PCIe AER messages and the BMC event log "
    "for link failures, reseat the GPU/riser and check its power cabling; RMA the GPU if it falls off again."
)


def _distinct_gpus(addresses: Iterable[str]) -> list[str]:
    """One entry per GPU: the driver names a GPU `0000:3b:00` in Xid lines and `0000:3b:00.0` elsewhere (and
    nvidia-smi `00000000:3B:00.0`); they are one device. The first spelling seen is kept."""
    seen: dict[str, str] = {}
    for address in addresses:
        if not address:
            continue
        parts = address.lower().split(":")
        key = ":".join([parts[0][-4:].rjust(4, "0"), *parts[1:]]) if len(parts) == 3 else address.lower()
        seen.setdefault(key.split(".")[0], address)
    return sorted(seen.values())


def kernel_checks(scan: KernelScan, errors: list[ErrorMatch]) -> list[Finding]:
    """xid-<code> findings (Xid 79 is reported as gpu-lost) and gpu-lost."""
    findings: list[Finding] = []
    by_code: dict[int, list[XidEvent]] = {}
    for event in scan.xids:
        by_code.setdefault(event.code, []).append(event)
    for code in sorted(by_code):
        if code == 79:
            continue
        events = by_code[code]
        info = xid_info(code)
        gpus = _distinct_gpus(event.pci for event in events)
        where = f"on PCI {', '.join(gpus)}" if gpus else "(PCI address not shown in the log)"
        quoted = f"first: {events[0].line!r}"
        if len(events) > 1:
            quoted += f"; last: {events[-1].line!r}"
        severity = info.severity
        if 144 <= code <= 150 and all("Nonfatal" in event.message for event in events):
            severity = "warning"  # NVLink5 Xids say themselves whether the link error was fatal
        findings.append(Finding(
            f"xid-{code}", severity,
            f"Xid {code} ({info.name}): {len(events)} event(s) on {max(len(gpus), 1)} GPU(s)",
            f"{len(events)} line(s) {where}; {quoted}; meaning: {info.meaning}",
            f"{info.remedy} (NVIDIA Xid catalog: {XID_DOC_URL})",
            ", ".join(gpus),
        ))
    findings.extend(_condition_findings(scan, {match.id for match in errors}))
    if scan.lost:
        gpus = _distinct_gpus(event.pci for event in scan.lost)
        findings.append(Finding(
            "gpu-lost", "critical", f"{len(gpus)} GPU(s) fell off the PCIe bus",
            f"{len(scan.lost)} kernel line(s) on PCI {', '.join(gpus)}; first: {scan.lost[0].line!r}",
            _LOST_REMEDY, ", ".join(gpus),
        ))
    else:
        lost = next((m for m in errors if m.id == "gpu-lost"), None)
        if lost is not None:
            findings.append(Finding("gpu-lost", "critical", "a GPU fell off the PCIe bus", repr(lost.line),
                                    _LOST_REMEDY))
    return findings


_INIT_REMEDY = (
    "The driver could not initialise the GPU. Read the lines around it in `dmesg` (GSP firmware, "
    "unsupported GPU, BAR/memory allocation): check the GPU is supported by the installed branch and module "
    "flavour, that Above 4G Decoding / Resizable BAR are enabled in the BIOS for large-BAR GPUs, then reset "
    "the GPU or reboot; RMA it if it keeps failing on a supported configuration."
)


def _condition_findings(scan: KernelScan, error_ids: set[str]) -> list[Finding]:
    """One finding per NVRM/module-loader condition, and rm-init-failed for RmInitAdapter failures (unless
    nvidia-smi's "No devices were found" already reports them: its evidence quotes these lines)."""
    findings: list[Finding] = []
    by_id: dict[str, list] = {}
    for condition, event in scan.conditions:
        by_id.setdefault(condition.id, []).append((condition, event))
    for hits in by_id.values():
        condition, first = hits[0]
        gpus = sorted({event.pci for _, event in hits if event.pci})
        quoted = f"first: {first.line[:300]!r}" + (f"; last: {hits[-1][1].line[:300]!r}" if len(hits) > 1 else "")
        findings.append(Finding(condition.id, condition.severity, condition.summary,
                                f"{len(hits)} kernel message(s); {quoted}", condition.remedy,
                                ", ".join(gpus) or None))
    if scan.init_failures and "no-devices-found" not in error_ids:
        gpus = sorted({event.pci for event in scan.init_failures if event.pci})
        where = f"on PCI {', '.join(gpus)}" if gpus else "(the driver did not name the GPU's PCI address)"
        findings.append(Finding(
            "rm-init-failed", "critical", f"the driver failed to initialise {max(len(gpus), 1)} GPU(s) (RmInitAdapter)",
            f"{len(scan.init_failures)} kernel message(s) {where}; first: "
            f"{scan.init_failures[0].line!r}", _INIT_REMEDY, ", ".join(gpus)))
    return findings
