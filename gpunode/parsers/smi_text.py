"""Parse `nvidia-smi -q` (also `-a`) text: indentation-based sections."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.model import GpuInfo, SmiReport
from gpunode.parsers.smi_values import clean, first_token, is_gpu_lost, is_unknown_error, to_bool, to_float, to_int

_FIX = "capture the complete output again with `nvidia-smi -q > smi.txt`"
_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_REASONS = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks_setting",
}


@dataclass
class _Node:
    key: str
    value: str | None
    line: int
    children: list[_Node] = field(default_factory=list)

    def child(self, *keys: str) -> _Node | None:
        """First descendant along keys (case-insensitive), or None."""
        node: _Node | None = self
        for key in keys:
            if node is None:
                return None
            wanted = key.lower()
            node = next((c for c in node.children if c.key.lower() == wanted), None)
        return node

    def get(self, *keys: str) -> str | None:
        node = self.child(*keys)
        return node.value if node is not None else None

    def walk(self, path: str = "") -> Iterator[tuple[str, _Node]]:
        for child in self.children:
            child_path = f"{path}/{child.key}" if path else child.key
            yield child_path, child
            yield from child.walk(child_path)


_SECTION = re.compile(r"^\s*(?:Remapped Rows|ECC Errors|Retired Pages|Temperature|GPU Power Readings|Power Readings|"
                      r"Clocks (?:Event|Throttle) Reasons|Inforom Version|PCI|Persistence Mode)\b.*$", re.M | re.I)
# Sections of a GPU's -q output that speak about its health: a head cut before all of them shows none.
_HEALTH_SECTIONS = ("ECC Errors", "Ecc Mode", "Retired Pages", "Remapped Rows", "Temperature", "Power Readings",
                    "GPU Power Readings", "Clocks Event Reasons", "Clocks Throttle Reasons", "Performance State")
_KEY_VALUE = re.compile(r"^\s+[A-Z][\w ./()-]*?\s+: \S", re.M)


def is_gpu_fragment(text: str) -> bool:
    """True for a piece of one GPU's `nvidia-smi -q` section (indented "Key : value" lines under known headings)."""
    return _SECTION.search(text) is not None and len(_KEY_VALUE.findall(text)) >= 2


def parse_smi_text(text: str, *, strict: bool = False) -> SmiReport:
    """Parse `nvidia-smi -q` output.

    Problems that leave the data incomplete (truncated output, unrecognised keys) are listed in
    SmiReport.warnings; with strict=True they raise SmiParseError instead.
    """
    root = _tree(text)
    gpu_nodes = [node for node in root.children if _GPU_HEADER.match(node.key) and node.value is None]
    if root.get("Driver Version") is None and not gpu_nodes:
        if is_gpu_fragment(text):
            return _fragment_report(root)
        raise SmiParseError(
            "no 'Driver Version' line and no 'GPU <bus id>' section: not `nvidia-smi -q` output", fix=_FIX)
    driver, cuda = _versions(root)
    attached = to_int(root.get("Attached GPUs"))
    warnings: list[str] = []
    missing: list[str] = []
    gpus = [_gpu(node, index, driver, cuda, warnings) for index, node in enumerate(gpu_nodes)]
    _check_count(attached, len(gpus), warnings, missing)
    if gpu_nodes:
        _check_last_section(gpu_nodes[-1], warnings, missing)
    if strict and warnings:
        raise SmiParseError("incomplete `nvidia-smi -q` output: " + "; ".join(warnings), fix=_FIX)
    return SmiReport(
        driver_version=driver,
        cuda_version=cuda,
        attached_gpus=attached,
        gpus=gpus,
        source_kind="text",
        timestamp=clean(root.get("Timestamp")),
        warnings=warnings,
        missing=missing,
        error_fields=[f"{key}: {root.get(key)}" for key in ("Driver Version", "CUDA Version")
                      if is_unknown_error(root.get(key))],
    )


def _fragment_report(root: _Node) -> SmiReport:
    """A piece of one GPU's section, without the header: one GPU, no driver version."""
    fragment = _Node("GPU (fragment of nvidia-smi -q)", None, 0, root.children)
    return SmiReport(None, None, None, [_gpu(fragment, 0, None, None, [])], "text",
                     warnings=["a fragment of one GPU's `nvidia-smi -q` section: no header, no driver version"])


def _versions(root: _Node) -> tuple[str | None, str | None]:
    """The driver version (KMD Version where Driver Version reads deprecated) and the CUDA (UMD) version."""
    driver_raw = root.get("Driver Version")
    driver = first_token(driver_raw)
    if driver_raw and "deprecated" in driver_raw.lower():
        driver = first_token(root.get("KMD Version")) or driver
    cuda = first_token(root.get("CUDA Version")) or first_token(root.get("CUDA UMD Version"))
    return driver, cuda


def _check_count(attached: int | None, found: int, warnings: list[str], missing: list[str]) -> None:
    """Warn when 'Attached GPUs' disagrees with the sections found; fewer sections means some are missing."""
    if attached is None or attached == found:
        return
    warnings.append(f"'Attached GPUs : {attached}' but the output holds {found} GPU section(s)")
    if attached > found:
        missing.append(f"{attached - found} of {attached} GPU section(s)")


def _check_last_section(last: _Node, warnings: list[str], missing: list[str]) -> None:
    """The last GPU section ends with 'Processes'; without it the output was cut, maybe before the health fields."""
    if last.child("Processes") is not None:
        return
    end = list(last.walk())[-1][0] if last.children else last.key
    warnings.append(f"output is truncated: section '{last.key}' ends at '{end}' without the final "
                    "'Processes' entry, so later fields are missing")
    if not any(last.child(name) is not None for name in _HEALTH_SECTIONS):
        missing.append(f"every health field of {last.key} (the -q output is cut before them)")


def _tree(text: str) -> _Node:
    root = _Node("", None, 0)
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("====="):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        if " : " in stripped:
            key, value = stripped.split(" : ", 1)
        elif stripped.endswith(" :"):
            key, value = stripped[:-2], ""
        else:
            key, value = stripped, None
        node = _Node(key.strip(), value.strip() if value is not None else None, number)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _first(node: _Node, *paths: tuple[str, ...]) -> str | None:
    for path in paths:
        value = node.get(*path)
        if clean(value) is not None:
            return value
    return None


def _gpu(node: _Node, index: int, driver: str | None, cuda: str | None, warnings: list[str]) -> GpuInfo:
    header = _GPU_HEADER.match(node.key)
    remap = node.child("Remapped Rows")
    device_id = clean(node.get("PCI", "Device Id"))
    return GpuInfo(
        index=index,
        name=clean(node.get("Product Name")),
        uuid=clean(node.get("GPU UUID")),
        pci_bus_id=clean(node.get("PCI", "Bus Id")) or (header.group(1) if header else None),
        driver_version=driver,
        cuda_version=cuda,
        memory_total_mib=to_int(node.get("FB Memory Usage", "Total")),
        memory_used_mib=to_int(node.get("FB Memory Usage", "Used")),
        persistence_mode=to_bool(node.get("Persistence Mode")),
        temperature_c=to_int(node.get("Temperature", "GPU Current Temp")),
        power_draw_w=to_float(_first(node, ("GPU Power Readings", "Power Draw"),
                                     ("GPU Power Readings", "Average Power Draw"),
                                     ("GPU Power Readings", "Instantaneous Power Draw"),
                                     ("Power Readings", "Power Draw"))),
        power_limit_w=to_float(_first(node, ("GPU Power Readings", "Current Power Limit"),
                                      ("Power Readings", "Power Limit"),
                                      ("Power Readings", "Enforced Power Limit"))),
        ecc_mode=to_bool(node.get("ECC Mode", "Current")),
        ecc_uncorrectable_volatile=_ecc_uncorrectable(node.child("ECC Errors", "Volatile")),
        ecc_uncorrectable_aggregate=_ecc_uncorrectable(node.child("ECC Errors", "Aggregate")),
        retired_pages_pending=_any_true(node.get("Retired Pages", "Pending Page Blacklist"),
                                        node.get("Retired Pages", "Pending Page Retirement"),
                                        node.get("Retired Pages", "Pending")),
        remapped_rows_pending=to_bool(remap.get("Pending")) if remap else None,
        remapped_rows_failure=to_bool(remap.get("Remapping Failure Occurred")) if remap else None,
        remapped_rows_uncorrectable=to_int(remap.get("Uncorrectable Error")) if remap else None,
        pcie_gen_current=to_int(node.get("PCI", "GPU Link Info", "PCIe Generation", "Current")),
        pcie_gen_max=to_int(node.get("PCI", "GPU Link Info", "PCIe Generation", "Max")),
        pcie_width_current=to_int(node.get("PCI", "GPU Link Info", "Link Width", "Current")),
        pcie_width_max=to_int(node.get("PCI", "GPU Link Info", "Link Width", "Max")),
        throttle_reasons_active=_active_reasons(node, warnings),
        mig_mode_current=to_bool(node.get("MIG Mode", "Current")),
        mig_mode_pending=to_bool(node.get("MIG Mode", "Pending")),
        mig_devices=_mig_devices(node),
        unknown_error_fields=[path for path, child in node.walk() if is_unknown_error(child.value)],
        lost_fields=[path for path, child in node.walk() if is_gpu_lost(child.value)],
        performance_state=clean(node.get("Performance State")),
        utilization_gpu_pct=to_int(node.get("Utilization", "Gpu")),
        fabric_state=clean(node.get("Fabric", "State")),
        fabric_status=clean(node.get("Fabric", "Status")),
        pci_device_id=device_id[2:] if device_id and device_id.lower().startswith("0x") else device_id,
    )


def _any_true(*values: str | None) -> bool | None:
    known = [flag for flag in (to_bool(value) for value in values) if flag is not None]
    return any(known) if known else None


def _ecc_uncorrectable(block: _Node | None) -> int | None:
    if block is None:
        return None
    double_bit = block.child("Double Bit")
    if double_bit is not None:  # Kepler..Volta layout
        total = to_int(double_bit.get("Total"))
        if total is not None:
            return total
        values = [to_int(child.value) for child in double_bit.children]
    else:
        names = {"sram uncorrectable", "sram uncorrectable parity", "sram uncorrectable sec-ded",
                 "dram uncorrectable"}
        if block.child("SRAM Uncorrectable Parity") is not None:
            names.discard("sram uncorrectable")
        values = [to_int(child.value) for child in block.children if child.key.lower() in names]
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _active_reasons(node: _Node, warnings: list[str]) -> list[str]:
    block = node.child("Clocks Event Reasons") or node.child("Clocks Throttle Reasons")
    if block is None:
        return []
    active: list[str] = []
    unknown: list[str] = []
    for _path, child in block.walk():
        name = _REASONS.get(child.key.lower())
        if name is None:
            unknown.append(f"'{child.key}' (line {child.line})")
        elif (child.value or "").strip() == "Active":
            active.append(name)
    if unknown:
        warnings.append(f"unrecognised keys under '{block.key}' of {node.key}: {', '.join(unknown)}; "
                        "their throttle state is unknown")
    return active


def _mig_devices(node: _Node) -> int:
    """Count "MIG Device" entries, inside a "MIG devices" block or directly under the GPU."""
    block = node.child("MIG devices") or node
    return sum(1 for child in block.children if child.key.lower() == "mig device")
