"""PCIe link and AER state of NVIDIA devices from `lspci -vv` (LnkCap vs LnkSta, UESta / CESta error bits)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.parsers.lspci import PciDevice, parse_lspci
from gpunode.parsers.model import Finding

_HEADER = re.compile(r"^(?P<slot>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<rest>\S.*)$")
_PROG_IF = re.compile(r"\s*\(prog-if [^)]*(?:\[[^\]]*\])?\)\s*$")
_FIELD = re.compile(r"^\s*(?P<name>LnkCap|LnkSta|UESta|CESta|Kernel driver in use):\s*(?P<value>.*)$")
_NOT_NVIDIA_DRIVER = ("nouveau", "nova_core", "nova-core")
_SPEED = re.compile(r"Speed\s+(?P<speed>[\d.]+)\s*GT/s")
_WIDTH = re.compile(r"Width\s+x(?P<width>\d+)")
_SET_BIT = re.compile(r"(?<![\w-])(?P<bit>[A-Za-z][\w]*)\+")
_DETAIL = re.compile(r"^\s*(?:Subsystem|Control|Status|Capabilities|Kernel driver in use|LnkCap|LnkSta|DevSta)"
                     r"\s*:", re.M)
# An NVIDIA GPU or NVSwitch (not the GPU's HDMI audio or USB function, which share its link).
_NVIDIA_GPU = re.compile(r"^(?:VGA compatible controller|3D controller|Bridge)\b.*(?:NVIDIA|\[10de:)|"
                         r"\[03(?:00|02)\].*\[10de:|\[0680\].*\[10de:")
_PCIE_FIX = ("Reseat the GPU (and its riser/cable), check the slot is wired for the width the card supports and "
             "that the BIOS sets the slot to the card's generation (not Gen1/Auto), update the BIOS, then compare "
             "`lspci -vv -s <slot> | grep Lnk` under load with a known-good node; a speed drop alone is normal "
             "while the GPU idles (it down-trains to save power).")


@dataclass
class LinkState:
    """One device's link capability and status and the AER error bits that are set."""

    slot: str
    description: str
    nvidia: bool
    cap_speed: float | None = None
    cap_width: int | None = None
    sta_speed: float | None = None
    sta_width: int | None = None
    downgraded: list[str] = field(default_factory=list)  # what lspci itself marks "(downgraded)" in LnkSta
    uncorrectable: list[str] = field(default_factory=list)
    correctable: list[str] = field(default_factory=list)
    driver: str | None = None  # "Kernel driver in use"


def is_lspci_vv(text: str) -> bool:
    """True for verbose lspci output (a device with its indented details, or LnkCap/LnkSta lines)."""
    if re.search(r"^\s*(?:LnkSta|LnkCap|Kernel driver in use):\s", text, re.M) is None:
        return False
    return len(_DETAIL.findall(text)) >= 2


def parse_lspci_vv(text: str) -> tuple[list[LinkState], list[PciDevice] | None]:
    """Link states of NVIDIA devices (or of an excerpt without a device line), and the NVIDIA PCI devices listed
    (None when the excerpt names no device)."""
    states: list[LinkState] = []
    headers: list[str] = []
    current: LinkState | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            rest = _PROG_IF.sub("", header.group("rest"))
            headers.append(f"{header.group('slot')} {rest}")
            current = LinkState(header.group("slot"), rest, _NVIDIA_GPU.search(rest) is not None)
            states.append(current)
            continue
        found = _FIELD.match(line)
        if found is None:
            continue
        if current is None:
            current = LinkState("?", "device of the excerpt (no lspci device line)", True)
            states.append(current)
        _read_field(current, found.group("name"), found.group("value"))
    devices = parse_lspci("\n".join(headers)) if headers else None
    return [s for s in states if s.nvidia], devices


def _read_field(state: LinkState, name: str, value: str) -> None:
    speed, width = _SPEED.search(value), _WIDTH.search(value)
    if name == "LnkCap":
        state.cap_speed = float(speed.group("speed")) if speed else None
        state.cap_width = int(width.group("width")) if width else None
    elif name == "LnkSta":
        state.sta_speed = float(speed.group("speed")) if speed else None
        state.sta_width = int(width.group("width")) if width else None
        state.downgraded = [f"{part.strip()}" for part in value.split(",") if "(downgraded)" in part]
    elif name == "Kernel driver in use":
        state.driver = value.strip()
    else:
        bits = [m.group("bit") for m in _SET_BIT.finditer(value)]
        (state.uncorrectable if name == "UESta" else state.correctable).extend(bits)


def link_findings(states: list[LinkState]) -> list[Finding]:
    """pcie-degraded (LnkSta below LnkCap), pcie-aer-uncorrectable and pcie-aer-correctable."""
    findings: list[Finding] = []
    slow = [(s, _link_note(s)) for s in states if _link_note(s)]
    if slow:
        findings.append(Finding(
            "pcie-degraded", "warning", f"PCIe link below its capability on {len(slow)} NVIDIA device(s) (lspci -vv)",
            "; ".join(f"{s.slot} {s.description[:60]}: {note}" for s, note in slow), _PCIE_FIX,
            ", ".join(s.slot for s, _ in slow)))
    foreign = [s for s in states if s.driver in _NOT_NVIDIA_DRIVER]
    if foreign:
        findings.append(Finding(
            "nouveau-bound", "critical", f"{len(foreign)} NVIDIA GPU(s) driven by {foreign[0].driver}, not nvidia",
            "; ".join(f"{s.slot}: Kernel driver in use: {s.driver}" for s in foreign),
            "Blacklist nouveau (`blacklist nouveau`, `options nouveau modeset=0` in "
            "/etc/modprobe.d/blacklist-nouveau.conf; nova_core likewise), rebuild the initramfs and reboot; "
            "`lspci -k -d 10de:` must then show `Kernel driver in use: nvidia`.", ", ".join(s.slot for s in foreign)))
    for attr, check_id, severity, what in (
            ("uncorrectable", "pcie-aer-uncorrectable", "critical", "uncorrectable"),
            ("correctable", "pcie-aer-correctable", "warning", "correctable")):
        hits = [s for s in states if getattr(s, attr)]
        if hits:
            register = "UESta" if attr == "uncorrectable" else "CESta"
            findings.append(Finding(
                check_id, severity, f"PCIe AER {what} errors recorded on {len(hits)} NVIDIA device(s)",
                "; ".join(f"{s.slot}: {register} {' '.join(b + '+' for b in getattr(s, attr))}" for s in hits),
                "The link between the GPU and its slot saw errors (bad TLPs/DLLPs, receiver errors, unsupported "
                "requests): check `dmesg | grep -i aer` for their rate, reseat the GPU and riser, check the slot's "
                "generation setting in the BIOS (force one generation lower to test), and RMA the card or riser if "
                "errors keep counting; uncorrectable errors precede Xid 79 (GPU fallen off the bus).",
                ", ".join(s.slot for s in hits)))
    return findings


def _link_note(state: LinkState) -> str | None:
    parts = []
    if state.sta_width and state.cap_width and state.sta_width < state.cap_width:
        parts.append(f"width x{state.sta_width} of x{state.cap_width}")
    if state.sta_speed and state.cap_speed and state.sta_speed < state.cap_speed:
        parts.append(f"speed {state.sta_speed:g} GT/s of {state.cap_speed:g} GT/s")
    if not parts and state.downgraded:  # an excerpt without LnkCap: lspci's own mark says it
        parts.append("LnkSta " + ", ".join(state.downgraded))
    return ", ".join(parts) or None
