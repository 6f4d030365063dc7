"""Findings of NVIDIA kernel messages the message catalogue knows and the hand-written kernel checks do not read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.parsers.errors_text import SEVERITY, inherited_fix
from gpunode.parsers.kernel_lines import kernel_messages
from gpunode.parsers.kernel_log import KernelScan
from gpunode.parsers.model import Finding

if TYPE_CHECKING:
    from gpunode.parsers.catalogs.messages import MessageEntry


# the contexts whose messages a kernel log or journal holds: the kernel's own, and the DKMS build a kernel package
# runs (`dkms autoinstall` output lands in the same journal); a container's or a framework's words there are quotes
_IN_KERNEL_LOGS = frozenset({"kernel", "build"})


def kernel_message_findings(text: str | None, scan: KernelScan) -> list[Finding]:
    """One finding per catalogue finding id read in text's messages by entries about NVIDIA's stack (kernel
    messages, and the DKMS build or kubelet lines a kernel log or journal holds beside them), skipping the messages
    an Xid, a lost GPU, an init failure or a kernel condition already reported (one finding per line)."""
    if not text:
        return []
    from gpunode.parsers.catalogs.messages import nvidia_matches  # the catalogue is read on first use

    taken = {xid.line for xid in scan.xids} | {lost.line for lost in scan.lost}
    taken |= {failure.line for failure in scan.init_failures}
    taken |= {event.line for _, event in scan.conditions}
    messages = [message.text for message in kernel_messages(text) if message.text not in taken]
    hits: dict[str, list[str]] = {}
    entries: dict[str, MessageEntry] = {}
    for entry, line in nvidia_matches("\n".join(messages)):
        if entry.context in _IN_KERNEL_LOGS and not any(line in other for other in taken):
            hits.setdefault(entry.finding, []).append(line)
            entries.setdefault(entry.finding, entry)
    findings: list[Finding] = []
    for finding_id, lines in hits.items():
        entry = entries[finding_id]
        quoted = f"{len(lines)} kernel line(s); first: {lines[0][:400]!r}"
        findings.append(Finding(finding_id, SEVERITY[entry.severity], entry.summary, quoted,
                                entry.fix or inherited_fix(finding_id)))
    return findings
