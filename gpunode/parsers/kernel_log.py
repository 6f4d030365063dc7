"""Xid events, "fallen off the bus" and adapter-init failures from dmesg / journal text."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import lru_cache

from gpunode.parsers.catalogs.kernel_conditions import CONDITIONS, KernelCondition
from gpunode.parsers.catalogs.xid import XID_DOC_URL, XID_MEANINGS, XidInfo, xid_info
from gpunode.parsers.kernel_lines import KernelMessage, kernel_messages
from gpunode.parsers.regex_needles import candidates, needles
from gpunode.parsers.vendor_lines import foreign, is_nvidia

__all__ = ["XID_DOC_URL", "XID_MEANINGS", "XidInfo", "xid_info", "XidEvent", "KernelEvent", "KernelScan",
           "scan_kernel_log", "has_kernel_markers"]

_PCI = r"(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
# the PCI address may be redacted by the poster ("Xid (PCI:...): 145"): still an Xid of an unknown GPU
_XID = re.compile(r"NVRM: Xid \((?:" + _PCI + r"|PCI:[^)]*)\):\s*(?P<code>\d+),?\s*(?P<rest>.*)$")
_XID_DETAIL = re.compile(r"^pid=(?P<pid>'[^']*'|[^,\s]+),\s*name=(?P<name>[^,]*),\s*(?P<msg>.*)$")
# The Kubernetes device plugin relays the Xids it receives from NVML (klog lines or bare):
# "XidCriticalError: Xid=48 on Device=GPU-...; marking device as unhealthy."
_XID_PLUGIN = re.compile(r"XidCriticalError: Xid=(?P<code>\d+) on Device=(?P<device>[^;\s]+)")
_LOST_OLD = re.compile(r"NVRM: GPU at " + _PCI + r" has fallen off the bus")
_LOST_NEW = re.compile(r"NVRM: GPU " + _PCI + r": GPU has fallen off the bus")
_LOST_ANY = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?" + _PCI + r"\b.*fallen off the bus", re.I)
_INIT_FAIL = re.compile(r"NVRM: (?:GPU " + _PCI + r": )?RmInitAdapter failed!\s*(?:\((?P<code>[^)]*)\))?")
_MARKER = re.compile(
    r"NVRM:|\bkernel:|^\s*\[\s*\d+\.\d+(?: <\s*[\d.]+>)?\]|^\s*\[\s*\+\d+\.\d{6}\]|^\s*\[<\s*\d+\.\d{6}>\]"
    r"|^\s*\[[A-Z][a-z]{2} ?\d{1,2} \d{2}:\d{2}\] |^\[[A-Z][a-z]{2} [A-Z][a-z]{2} |^kern\s+:|: kern: \w+: \["
    r"|^\{.*\"MESSAGE\""
    r"|^\d+,\d+,\d+,[-c+][^;]*;|^<\d>\[\s*\d+\.\d+\]|^-- (?:No entries|Logs begin at|Journal begins at) "
    r"|^\S+ +\d+ \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ (?:systemd|nv-fabricmanager|nvidia-[\w.-]+|bumblebeed|Xorg)\[\d+\]: "
    r"|SXid \(PCI:|^\[drm\] |\bnouveau (?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]: "
    r"|XidCriticalError: Xid=\d+ on Device=",
    re.M)
_NEEDLES = tuple(needles(condition.pattern) for condition in CONDITIONS)


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
    conditions: list[tuple[KernelCondition, KernelEvent]] = field(default_factory=list)

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
        self.conditions.extend(other.conditions)


def has_kernel_markers(text: str) -> bool:
    """True if text looks like kernel log lines (NVRM messages, dmesg or syslog prefixes)."""
    return _MARKER.search(text) is not None


def _runs(messages: list[KernelMessage]) -> list[KernelMessage]:
    """Consecutive NVRM messages joined into one (old drivers print one sentence over several timestamped lines)."""
    runs: list[KernelMessage] = []
    current: list[KernelMessage] = []
    for message in [*messages, None]:
        if message is not None and message.text.startswith("NVRM:"):
            current.append(message)
            continue
        if len(current) > 1:
            text = " ".join([current[0].text, *(m.text.removeprefix("NVRM:").strip() for m in current[1:])])
            runs.append(KernelMessage(text, current[0].timestamp, "\n".join(m.raw for m in current)))
        current = []
    return runs


def _matches(texts: list[str]) -> list[tuple[int, KernelCondition]]:
    """(text index, condition) for every condition matching a text, in text then CONDITIONS order.

    The regexes run only on texts holding one of the words their condition needs (see regex_needles).
    """
    chances = candidates(texts, _NEEDLES)
    indexes = sorted(set().union(*(c for c in chances if c is not None))) if None not in chances else range(len(texts))
    return [(index, condition) for index in indexes for condition, chance in zip(CONDITIONS, chances, strict=True)
            if (chance is None or index in chance) and condition.pattern.search(texts[index])]


_ADDRESS = re.compile(r"\b(?:[0-9a-f]{4}:)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\b", re.I)


def _ours(messages: list[KernelMessage]) -> list[KernelMessage]:
    """messages without other vendors' and devices' (an amdgpu/i915/NVMe/NIC line, or a PCIe AER line about a device
    only such a driver names): their conditions are not NVIDIA's."""
    theirs = {index for index, message in enumerate(messages) if foreign(message.text) is not None}
    if not theirs:
        return messages
    addresses = {a.lower() for index in theirs for a in _ADDRESS.findall(messages[index].text)}
    kept = []
    for index, message in enumerate(messages):
        named = {a.lower() for a in _ADDRESS.findall(message.text)}
        if index in theirs or (named & addresses and not is_nvidia(message.text)):
            continue
        kept.append(message)
    return kept


def _conditions(scan: KernelScan, messages: list[KernelMessage]) -> None:
    messages = _ours(messages)
    found: set[str] = set()
    for index, condition in _matches([message.text for message in messages]):
        message = messages[index]
        found.add(condition.id)
        pci = re.search(_PCI, message.text)
        scan.conditions.append((condition, KernelEvent(pci.group("pci").lower() if pci else "",
                                                       condition.id, message.timestamp, message.text)))
    runs = _runs(messages)  # a sentence split over several NVRM lines
    for index, condition in _matches([run.text for run in runs]):
        run = runs[index]
        pci = re.search(_PCI, run.text)
        event = KernelEvent(pci.group("pci").lower() if pci else "", condition.id, run.timestamp, run.text)
        if condition.id not in found:
            found.add(condition.id)
            scan.conditions.append((condition, event))
        elif pci:  # the GPU's address was on the sentence's first line only
            _name_gpu(scan, condition.id, event)


def _name_gpu(scan: KernelScan, condition_id: str, event: KernelEvent) -> None:
    """Give the first event of condition_id that names no GPU the PCI address its whole sentence names."""
    for number, (condition, old) in enumerate(scan.conditions):
        if condition.id == condition_id and not old.pci and old.line.removeprefix("NVRM:").strip() in event.line:
            scan.conditions[number] = (condition, dataclasses.replace(old, pci=event.pci))
            return


def scan_kernel_log(text: str) -> KernelScan:
    """Parse kernel messages in any common log form (see kernel_lines) for Xids, lost GPUs and conditions."""
    scan = KernelScan()
    scan.extend(_scan(text))  # a copy: the cached scan stays as it was
    return scan


@lru_cache(maxsize=4)
def _scan(text: str) -> KernelScan:
    """scan_kernel_log's work, kept for the last few texts (diagnose scans one log several times)."""
    scan = KernelScan()
    messages = kernel_messages(text)
    _conditions(scan, messages)
    for message in messages:
        line, ts = message.text, message.timestamp
        plugin = _XID_PLUGIN.search(line)
        if plugin:
            scan.xids.append(XidEvent(int(plugin.group("code")), plugin.group("device").lower(), None, None,
                                      "reported by the NVIDIA device plugin", ts, line))
            if plugin.group("code") == "79":
                scan.lost.append(KernelEvent(plugin.group("device").lower(), "Xid 79", ts, line))
            continue
        if "NVRM" not in line:
            continue
        xid = _XID.search(line)
        if xid:
            rest = xid.group("rest").strip()
            detail = _XID_DETAIL.match(rest)
            event = XidEvent(
                code=int(xid.group("code")),
                pci=(xid.group("pci") or "").lower(),
                pid=detail.group("pid").strip("'") if detail else None,
                process=detail.group("name").strip() if detail else None,
                message=(detail.group("msg") if detail else rest).strip(),
                timestamp=ts,
                line=line,
            )
            scan.xids.append(event)
            if event.code == 79:
                scan.lost.append(KernelEvent(event.pci, "Xid 79", event.timestamp, line))
            continue
        lost = _LOST_OLD.search(line) or _LOST_NEW.search(line) or _LOST_ANY.search(line)
        if lost:
            scan.lost.append(KernelEvent(lost.group("pci").lower(), "fallen off the bus", ts, line))
            continue
        init = _INIT_FAIL.search(line)
        if init:
            pci = (init.group("pci") or "").lower()
            scan.init_failures.append(KernelEvent(pci, init.group("code") or "", ts, line))
    return scan
