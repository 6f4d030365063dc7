"""NVIDIA PCI functions from the `@@kv pci SLOT` blocks."""

from __future__ import annotations

import re

from gpunode.facts.blocks import Blocks
from gpunode.facts.model import GPU_CLASS_PREFIX, NVSWITCH_CLASS_PREFIX, PciGpu

# transfer rate per lane (GT/s) -> PCIe generation
_GT_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def link_gen(speed: str) -> int | None:
    """PCIe generation from a sysfs link speed ("16.0 GT/s PCIe" -> 4); None if unknown."""
    match = re.match(r"\s*(\d+(?:\.\d+)?)\s*GT/s", speed)
    return _GT_TO_GEN.get(float(match.group(1))) if match else None


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def pci_gpus(blocks: Blocks) -> tuple[PciGpu, ...]:
    """GPUs (class 0x03xxxx) and NVSwitches (0x0680xx), sorted by slot; audio/USB functions skipped."""
    found = []
    for name in blocks.kv_names("pci "):
        fields = {key: values[-1].strip() for key, values in blocks.kv[name].items() if values}
        class_code = fields.get("class", "").lower()
        is_nvswitch = class_code.startswith(NVSWITCH_CLASS_PREFIX)
        if not (is_nvswitch or class_code.startswith(GPU_CLASS_PREFIX)):
            continue
        sub_vendor, sub_device = fields.get("subsystem_vendor", ""), fields.get("subsystem_device", "")
        numa = _int(fields.get("numa_node", ""))
        found.append(
            PciGpu(
                slot=name[len("pci ") :],
                device_id=fields.get("device", "").lower(),
                subsystem_id=f"{sub_vendor}:{sub_device}".lower() if sub_vendor and sub_device else "",
                class_code=class_code,
                driver=fields.get("driver") or None,
                link_gen_current=link_gen(fields.get("current_link_speed", "")),
                link_gen_max=link_gen(fields.get("max_link_speed", "")),
                link_width_current=_int(fields.get("current_link_width", "")),
                link_width_max=_int(fields.get("max_link_width", "")),
                is_nvswitch=is_nvswitch,
                numa_node=numa if numa is not None and numa >= 0 else None,
            )
        )
    return tuple(sorted(found, key=lambda g: g.slot))
