"""NVIDIA GPUs and NVSwitches from `lspci -nn` or plain `lspci` (or from sysfs vendor/device/class facts)."""

from __future__ import annotations

import re
from typing import NamedTuple

NVIDIA_VENDOR = "10de"
_GPU_CLASSES = frozenset({"0300", "0302"})  # VGA compatible controller, 3D controller
_NVSWITCH_CLASS = "0680"  # Bridge (other): NVSwitch
_LINE = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<class_name>[^\[]*?)\s*\[(?P<class_code>[0-9a-fA-F]{4})\]:\s+"
    r"(?P<description>.*?)\s+\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]"
    r"(?:\s+\(rev\s+[0-9a-fA-F]+\))?\s*$"
)

# Plain `lspci` (no -nn): "0009:01:00.0 3D controller: NVIDIA Corporation Device 2941 (rev a1)" names the class
# and the vendor instead of giving their codes; the device id shows only while pci.ids lacks the device.
_PLAIN = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<class_name>[A-Za-z0-9][A-Za-z0-9 /()-]*?):\s+(?P<description>\S.*?)(?:\s+\(rev\s+[0-9a-fA-F]+\))?\s*$"
)
_CLASS_CODES = {"vga compatible controller": "0300", "3d controller": "0302", "bridge": "0680"}
_PLAIN_DEVICE = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")


class PciDevice(NamedTuple):
    """An NVIDIA GPU or NVSwitch on the PCI bus."""

    slot: str
    device_id: str
    description: str
    is_nvswitch: bool

    @property
    def is_gpu(self) -> bool:
        return not self.is_nvswitch


def is_lspci_line(line: str) -> bool:
    """True if line looks like one `lspci -nn` or plain `lspci` device line (any vendor)."""
    line = line.strip()
    return _LINE.match(line) is not None or _PLAIN.match(line) is not None


def classify_pci(slot: str, vendor_id: str, device_id: str, class_code: str,
                 description: str = "") -> PciDevice | None:
    """PciDevice for an NVIDIA GPU/NVSwitch, None for other vendors or NVIDIA audio/USB functions.

    class_code may be lspci's "0302" or sysfs's "0x030200".
    """
    vendor = vendor_id.lower().removeprefix("0x")
    code = class_code.lower().removeprefix("0x")[:4]
    if vendor != NVIDIA_VENDOR:
        return None
    device = device_id.lower().removeprefix("0x")
    if code in _GPU_CLASSES:
        return PciDevice(slot, device, description, False)
    if code == _NVSWITCH_CLASS:
        return PciDevice(slot, device, description, True)
    return None


def parse_lspci(text: str) -> list[PciDevice]:
    """NVIDIA GPUs and NVSwitches in `lspci -nn` (or plain `lspci`) output, in file order."""
    devices: list[PciDevice] = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            device = classify_pci(match.group("slot"), match.group("vendor"), match.group("device"),
                                  match.group("class_code"), match.group("description"))
        else:
            device = _classify_plain(line.strip())
        if device is not None:
            devices.append(device)
    return devices


def _classify_plain(line: str) -> PciDevice | None:
    """A plain `lspci` line of an NVIDIA GPU/NVSwitch (vendor and class by name; device id when shown)."""
    match = _PLAIN.match(line)
    if not match or not match.group("description").startswith("NVIDIA Corporation"):
        return None
    code = _CLASS_CODES.get(match.group("class_name").strip().lower())
    if code is None:
        return None
    device = _PLAIN_DEVICE.search(match.group("description"))
    return classify_pci(match.group("slot"), NVIDIA_VENDOR, device.group(1) if device else "", code,
                        match.group("description"))
