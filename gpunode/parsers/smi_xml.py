"""Parse `nvidia-smi -q -x` output, DTD schema versions v9 to v13."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.model import GpuInfo, SmiReport
from gpunode.parsers.smi_values import clean, first_token, is_gpu_lost, is_unknown_error, to_bool, to_float, to_int
from gpunode.parsers.xml_repair import close_truncated

_DTD = re.compile(r"nvsmi_device_v(\d+)\.dtd")
_FIX = "capture it again with `nvidia-smi -q -x > smi.xml` and check the file is complete"

# Uncorrectable ECC counters, new (Turing+) and old (Kepler..Volta) layouts.
_NEW_UNCORRECTABLE = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                      "dram_uncorrectable")
_OLD_UNCORRECTABLE = ("device_memory", "register_file", "l1_cache", "l2_cache", "texture_memory",
                      "texture_shm", "cbu")
# power_readings (<=v11) became gpu_power_readings (v12); power_draw split into average/instant (570+).
_POWER_DRAW = ("gpu_power_readings/power_draw", "gpu_power_readings/average_power_draw",
               "gpu_power_readings/instant_power_draw", "power_readings/power_draw")
_POWER_LIMIT = ("gpu_power_readings/current_power_limit", "power_readings/power_limit",
                "power_readings/enforced_power_limit")
_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")


def parse_smi_xml(text: str | bytes) -> SmiReport:
    """Parse one `nvidia-smi -q -x` capture; raise SmiParseError if it is not one."""
    repaired = close_truncated(text) if isinstance(text, str) else None
    root = _parse_root(repaired or text)
    head = text[:400].decode("utf-8", "replace") if isinstance(text, bytes) else text[:400]
    dtd = _DTD.search(head)
    driver = first_token(_text(root, "driver_version"))
    cuda = first_token(_text(root, "cuda_version"))
    gpus = [_gpu(element, index, driver, cuda) for index, element in enumerate(root.findall("gpu"))]
    attached = to_int(_text(root, "attached_gpus"))
    warnings = []
    missing = []
    if repaired:
        warnings.append("the XML is cut off before </nvidia_smi_log>")
        missing.append("the rest of the -q -x document (cut off)")
    if attached is not None and attached != len(gpus):
        warnings.append(f"attached_gpus is {attached} but the XML holds {len(gpus)} <gpu> element(s)")
        if attached > len(gpus):
            missing.append(f"{attached - len(gpus)} of {attached} <gpu> element(s)")
    return SmiReport(
        driver_version=driver,
        cuda_version=cuda,
        attached_gpus=attached,
        gpus=gpus,
        source_kind="xml",
        schema_version=int(dtd.group(1)) if dtd else None,
        timestamp=clean(_text(root, "timestamp")),
        warnings=warnings,
        missing=missing,
        error_fields=[f"{name}: {value}" for name, value in (("driver_version", _text(root, "driver_version")),
                                                               ("cuda_version", _text(root, "cuda_version")))
                      if is_unknown_error(value)],
    )


def _parse_root(text: str | bytes) -> ET.Element:
    sample = text[:2000] if isinstance(text, str) else text[:2000].decode("utf-8", "replace")
    if "<!ENTITY" in sample:
        raise SmiParseError("XML declares entities; refusing to expand them", fix=_FIX)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SmiParseError(f"not well-formed XML ({exc})", fix=_FIX) from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"XML root is <{root.tag}>, not <nvidia_smi_log>", fix=_FIX)
    return root


def _text(element: ET.Element | None, path: str) -> str | None:
    if element is None:
        return None
    found = element.find(path)
    return found.text if found is not None else None


def _first(element: ET.Element, *paths: str) -> str | None:
    """Text of the first path that holds a real value (handles renamed elements)."""
    for path in paths:
        value = _text(element, path)
        if clean(value) is not None:
            return value
    return None


def _gpu(g: ET.Element, index: int, driver: str | None, cuda: str | None) -> GpuInfo:
    pci = g.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    volatile, aggregate = _ecc_uncorrectable(g.find("ecc_errors"))
    remap = g.find("remapped_rows")
    retired = g.find("retired_pages")
    return GpuInfo(
        index=index,
        name=clean(_text(g, "product_name")),
        uuid=clean(_text(g, "uuid")),
        pci_bus_id=clean(_text(pci, "pci_bus_id")) or clean(g.get("id")),
        driver_version=driver,
        cuda_version=cuda,
        memory_total_mib=to_int(_text(g, "fb_memory_usage/total")),
        memory_used_mib=to_int(_text(g, "fb_memory_usage/used")),
        persistence_mode=to_bool(_text(g, "persistence_mode")),
        temperature_c=to_int(_text(g, "temperature/gpu_temp")),
        power_draw_w=to_float(_first(g, *_POWER_DRAW)),
        power_limit_w=to_float(_first(g, *_POWER_LIMIT)),
        ecc_mode=to_bool(_text(g, "ecc_mode/current_ecc")),
        ecc_uncorrectable_volatile=volatile,
        ecc_uncorrectable_aggregate=aggregate,
        retired_pages_pending=_any_true(_text(retired, "pending_retirement"),
                                        _text(retired, "pending_blacklist")),
        remapped_rows_pending=to_bool(_text(remap, "remapped_row_pending")),
        remapped_rows_failure=to_bool(_text(remap, "remapped_row_failure")),
        remapped_rows_uncorrectable=to_int(_text(remap, "remapped_row_unc")),
        pcie_gen_current=to_int(_text(link, "pcie_gen/current_link_gen")),
        pcie_gen_max=to_int(_text(link, "pcie_gen/max_link_gen")),
        pcie_width_current=to_int(_text(link, "link_widths/current_link_width")),
        pcie_width_max=to_int(_text(link, "link_widths/max_link_width")),
        throttle_reasons_active=_active_reasons(g),
        mig_mode_current=to_bool(_text(g, "mig_mode/current_mig")),
        mig_mode_pending=to_bool(_text(g, "mig_mode/pending_mig")),
        mig_devices=len(g.findall("mig_devices/mig_device")),
        inforom_ok=None,
        unknown_error_fields=_unknown_errors(g),
        lost_fields=_unknown_errors(g, is_gpu_lost),
        performance_state=clean(_text(g, "performance_state")),
        utilization_gpu_pct=to_int(_text(g, "utilization/gpu_util")),
        fabric_state=clean(_text(g, "fabric/state")),
        fabric_status=clean(_text(g, "fabric/status")),
        pci_device_id=clean(_text(pci, "pci_device_id")),
    )


def _any_true(*values: str | None) -> bool | None:
    flags = [to_bool(value) for value in values]
    known = [flag for flag in flags if flag is not None]
    return any(known) if known else None


def _ecc_uncorrectable(ecc: ET.Element | None) -> tuple[int | None, int | None]:
    """(volatile, aggregate) uncorrectable ECC error totals; None when not reported."""
    if ecc is None:
        return None, None
    return _sum_uncorrectable(ecc.find("volatile")), _sum_uncorrectable(ecc.find("aggregate"))


def _sum_uncorrectable(block: ET.Element | None) -> int | None:
    if block is None:
        return None
    double_bit = block.find("double_bit")
    if double_bit is not None:  # old layout: volatile/double_bit/{device_memory,...,total}
        total = to_int(_text(double_bit, "total"))
        if total is not None:
            return total
        return _sum(to_int(_text(double_bit, name)) for name in _OLD_UNCORRECTABLE)
    names: tuple[str, ...] = _NEW_UNCORRECTABLE
    if block.find("sram_uncorrectable_parity") is not None:  # 555+: split SRAM counter, no plain one
        names = tuple(name for name in names if name != "sram_uncorrectable")
    return _sum(to_int(_text(block, name)) for name in names)


def _sum(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _active_reasons(g: ET.Element) -> list[str]:
    block = g.find("clocks_event_reasons")
    if block is None:
        block = g.find("clocks_throttle_reasons")
    if block is None:
        return []
    active = []
    for child in block:
        name = child.tag
        for prefix in _REASON_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        if (child.text or "").strip() == "Active":
            active.append(name)
    return active


def _unknown_errors(g: ET.Element, test: Callable[[str | None], bool] = is_unknown_error) -> list[str]:
    """Paths of fields whose value is "Unknown Error" / "ERR!" (NVML could not read them), or that pass test."""
    found: list[str] = []

    def walk(element: ET.Element, path: str) -> None:
        for child in element:
            child_path = f"{path}/{child.tag}" if path else child.tag
            if len(child):
                walk(child, child_path)
            elif test(child.text):
                found.append(child_path)

    walk(g, "")
    return found
