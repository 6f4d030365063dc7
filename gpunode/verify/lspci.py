"""NVIDIA GPUs and NVSwitches from `lspci -nn` (or from sysfs vendor/device/class facts)."""

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
    """True if line looks like one `lspci -nn` device line (any vendor)."""
    return _LINE.match(line.strip()) is not None


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
    """NVIDIA GPUs and NVSwitches in `lspci -nn` output, in file order."""
    devices: list[PciDevice] = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        device = classify_pci(match.group("slot"), match.group("vendor"), match.group("device"),
                              match.group("class_code"), match.group("description"))
        if device is not None:
            devices.append(device)
    return devices
