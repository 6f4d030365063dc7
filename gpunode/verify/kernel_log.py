"""Xid events, "fallen off the bus" and adapter-init failures from dmesg / journal text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.verify.xid_catalog import XID_DOC_URL, XID_MEANINGS, XidInfo, xid_info

__all__ = ["XID_DOC_URL", "XID_MEANINGS", "XidInfo", "xid_info", "XidEvent", "KernelEvent", "KernelScan",
           "scan_kernel_log", "has_kernel_markers"]

_PCI = r"(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
_XID = re.compile(r"NVRM: Xid \(" + _PCI + r"\):\s*(?P<code>\d+),?\s*(?P<rest>.*)$")
_XID_DETAIL = re.compile(r"^pid=(?P<pid>'[^']*'|[^,\s]+),\s*name=(?P<name>[^,]*),\s*(?P<msg>.*)$")
_LOST_OLD = re.compile(r"NVRM: GPU at " + _PCI + r" has fallen off the bus")
_LOST_NEW = re.compile(r"NVRM: GPU " + _PCI + r": GPU has fallen off the bus")
_INIT_FAIL = re.compile(r"NVRM: GPU " + _PCI + r": RmInitAdapter failed! \((?P<code>[^)]*)\)")
_TIMESTAMPS = (
    re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[,.]?\d*(?:[+-]\d{2}:?\d{2}|Z)?"),
    re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d{2}:\d{2}:\d{2} \d{4})\]"),
    re.compile(r"^\[\s*(\d+\.\d+)\]"),
    re.compile(r"^([A-Z][a-z]{2} +\d+ \d{2}:\d{2}:\d{2})"),
)
_MARKER = re.compile(r"NVRM:|\bkernel:|^\[\s*\d+\.\d+\]|^\[[A-Z][a-z]{2} [A-Z][a-z]{2} |^kern\s+:", re.M)


@dataclass(frozen=True)
class XidEvent:
    """One `NVRM: Xid (PCI:...): N, ...` line."""

    code: int
    pci: str
    pid: str | None
    process: str | None
    message: str
    timestamp: str | None
    line: str


@dataclass(frozen=True)
class KernelEvent:
    """A "fallen off the bus" or "RmInitAdapter failed" line."""

    pci: str
    detail: str
    timestamp: str | None
    line: str


@dataclass
class KernelScan:
    """Everything GPU-relevant found in one kernel log."""

    xids: list[XidEvent] = field(default_factory=list)
    lost: list[KernelEvent] = field(default_factory=list)
    init_failures: list[KernelEvent] = field(default_factory=list)

    def xid_counts(self) -> dict[int, int]:
        """{code: number of lines}."""
        counts: dict[int, int] = {}
        for event in self.xids:
            counts[event.code] = counts.get(event.code, 0) + 1
        return counts

    def extend(self, other: KernelScan) -> None:
        self.xids.extend(other.xids)
        self.lost.extend(other.lost)
        self.init_failures.extend(other.init_failures)


def has_kernel_markers(text: str) -> bool:
    """True if text looks like kernel log lines (NVRM messages, dmesg or syslog prefixes)."""
    return _MARKER.search(text) is not None


def _timestamp(line: str) -> str | None:
    for pattern in _TIMESTAMPS:
        match = pattern.search(line)
        if match:
            return match.group(match.lastindex or 0)
    return None


def scan_kernel_log(text: str) -> KernelScan:
    """Parse dmesg (plain, -T, --decode --time-format=iso) or journal/syslog text."""
    scan = KernelScan()
    for raw in text.splitlines():
        if "NVRM" not in raw:
            continue
        line = raw.strip()
        xid = _XID.search(line)
        if xid:
            rest = xid.group("rest").strip()
            detail = _XID_DETAIL.match(rest)
            event = XidEvent(
                code=int(xid.group("code")),
                pci=xid.group("pci").lower(),
                pid=detail.group("pid").strip("'") if detail else None,
                process=detail.group("name").strip() if detail else None,
                message=(detail.group("msg") if detail else rest).strip(),
                timestamp=_timestamp(line),
                line=line,
            )
            scan.xids.append(event)
            if event.code == 79:
                scan.lost.append(KernelEvent(event.pci, "Xid 79", event.timestamp, line))
            continue
        lost = _LOST_OLD.search(line) or _LOST_NEW.search(line)
        if lost:
            pci = lost.group("pci").lower()
            scan.lost.append(KernelEvent(pci, "fallen off the bus", _timestamp(line), line))
            continue
        init = _INIT_FAIL.search(line)
        if init:
            pci = init.group("pci").lower()
            scan.init_failures.append(KernelEvent(pci, init.group("code"), _timestamp(line), line))
    return scan
