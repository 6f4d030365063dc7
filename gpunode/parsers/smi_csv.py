"""Parse `nvidia-smi --query-gpu=... --format=csv` output."""

from __future__ import annotations

import csv
import io
import re

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.model import GpuInfo, SmiReport
from gpunode.parsers.smi_values import clean, first_token, is_gpu_lost, is_unknown_error, to_bool, to_float, to_int

_FIX = "capture it with `nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,... --format=csv`"
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")
_FIELD = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")
_GPU_FIELDS = frozenset({"index", "name", "gpu_name", "uuid", "gpu_uuid", "pci.bus_id", "driver_version",
                         "memory.total", "count", "serial", "gpu_serial"})
_PROCESS_FIELDS = frozenset({"pid", "process_name", "used_gpu_memory", "used_memory"})
_RETIRED_FIELDS = frozenset({"retired_pages.address", "retired_pages.timestamp", "retired_pages.cause"})
_REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_REASON_SKIP = frozenset({"supported", "active"})


def field_name(header: str) -> str:
    """Query field of a CSV header: "memory.total [MiB]" -> "memory.total"."""
    return _UNIT.sub("", header.strip())


_QUERY = re.compile(r"--query-(?:gpu|compute-apps|retired-pages)[= ](?P<fields>\S+)")


def csv_body(text: str) -> str:
    """text without a leading echoed command line (`nvidia-smi --query-gpu=... --format=csv`); for
    `--format=csv,noheader` the field list of that command line becomes the header."""
    lines = text.splitlines(keepends=True)
    header = None
    while lines and ("--query-" in lines[0] or not lines[0].strip()):
        query = _QUERY.search(lines[0])
        if query and "noheader" in lines[0]:
            header = ", ".join(query.group("fields").split(",")) + "\n"
        lines.pop(0)
    return (header or "") + "".join(_from_columns(lines))


_COLUMNS = re.compile(r"\s{2,}|\t")


def _from_columns(lines: list[str]) -> list[str]:
    """CSV piped through `column -s, -t` (fields aligned with spaces, no commas) back to CSV; other lines as
    they are."""
    first = next((line for line in lines if line.strip()), "")
    names = _COLUMNS.split(first.strip())
    if "," in first or len(names) < 2 or not all(_FIELD.match(field_name(n)) for n in names):
        return lines
    return [", ".join(_COLUMNS.split(line.strip())) + "\n" if line.strip() else line for line in lines]


def csv_query_kind(text: str) -> str | None:
    """Which nvidia-smi CSV query produced text: "gpu", "compute-apps", "retired-pages", or None."""
    text = csv_body(text)
    first = next((line for line in text.splitlines() if line.strip()), "")
    fields = {field_name(part) for part in first.split(",")}
    if not all(_FIELD.match(name) for name in fields):
        return None
    if fields & _RETIRED_FIELDS:
        return "retired-pages"
    if fields & _PROCESS_FIELDS:
        return "compute-apps"
    if len(fields) >= 2 and fields & _GPU_FIELDS:
        return "gpu"
    return None


def parse_smi_csv(text: str) -> SmiReport:
    """Parse --query-gpu CSV (with or without units/header-less is rejected)."""
    kind = csv_query_kind(text)
    if kind != "gpu":
        what = f"--query-{kind} output" if kind else "no recognised --query-gpu header"
        raise SmiParseError(f"{what}: it does not list GPUs", fix=_FIX)
    rows = list(csv.reader(io.StringIO(csv_body(text).strip()), skipinitialspace=True))
    header = [field_name(name) for name in rows[0]]
    records = [dict(zip(header, (value.strip() for value in row), strict=False)) for row in rows[1:] if row]
    positions = _positions(header, records, looped=_LOOP.search(text.split("\n", 1)[0]) is not None)
    gpus = [_gpu(record, position) for position, record in zip(positions, records, strict=True)]
    driver = next((gpu.driver_version for gpu in gpus if gpu.driver_version), None)
    counts = {to_int(record.get("count")) for record in records} - {None}
    return SmiReport(
        driver_version=driver,
        cuda_version=None,
        attached_gpus=counts.pop() if len(counts) == 1 else None,
        gpus=gpus,
        source_kind="csv",
        timestamp=clean(records[0].get("timestamp")) if records else None,
    )


_IDENTITY = frozenset({"index", "uuid", "gpu_uuid", "pci.bus_id", "gpu_bus_id", "serial", "gpu_serial"})
_LOOP = re.compile(r"\s(?:-l|-lms|--loop|--loop-ms)(?:[= ]\d+)?(?:\s|$)")


def _positions(header: list[str], records: list[dict[str, str]], looped: bool) -> list[int]:
    """The GPU position of each row. Without an identity column, a time series (`-l N`) repeats the same GPUs:
    rows that share a timestamp are different GPUs; with no timestamp, a looped query's rows are one GPU."""
    if _IDENTITY & set(header):
        return list(range(len(records)))
    if "timestamp" in header:
        seen: dict[str, int] = {}
        positions = []
        for record in records:
            stamp = record.get("timestamp", "")
            positions.append(seen.get(stamp, 0))
            seen[stamp] = positions[-1] + 1
        return positions
    return [0] * len(records) if looped else list(range(len(records)))


def _get(record: dict[str, str], *names: str) -> str | None:
    for name in names:
        value = record.get(name)
        if clean(value) is not None:
            return value
    return None


def _gpu(record: dict[str, str], position: int) -> GpuInfo:
    index = to_int(record.get("index"))
    reasons = []
    for key, value in record.items():
        if key.startswith(_REASON_PREFIXES):
            name = key.split(".", 1)[1]
            if name not in _REASON_SKIP and value == "Active":
                reasons.append(name)
    device_id = clean(record.get("pci.device_id"))
    checksum = clean(record.get("inforom.checksum_validation"))
    return GpuInfo(
        index=index if index is not None else position,
        name=clean(_get(record, "name", "gpu_name")),
        uuid=clean(_get(record, "uuid", "gpu_uuid")),
        pci_bus_id=clean(_get(record, "pci.bus_id", "gpu_bus_id")),
        driver_version=first_token(record.get("driver_version")),
        memory_total_mib=to_int(record.get("memory.total")),
        memory_used_mib=to_int(record.get("memory.used")),
        persistence_mode=to_bool(record.get("persistence_mode")),
        temperature_c=to_int(record.get("temperature.gpu")),
        power_draw_w=to_float(_get(record, "power.draw", "power.draw.average", "power.draw.instant")),
        power_limit_w=to_float(_get(record, "power.limit", "enforced.power.limit")),
        ecc_mode=to_bool(record.get("ecc.mode.current")),
        ecc_uncorrectable_volatile=to_int(record.get("ecc.errors.uncorrected.volatile.total")),
        ecc_uncorrectable_aggregate=to_int(record.get("ecc.errors.uncorrected.aggregate.total")),
        retired_pages_pending=to_bool(record.get("retired_pages.pending")),
        remapped_rows_pending=to_bool(record.get("remapped_rows.pending")),
        remapped_rows_failure=to_bool(record.get("remapped_rows.failure")),
        remapped_rows_uncorrectable=to_int(record.get("remapped_rows.uncorrectable")),
        pcie_gen_current=to_int(_get(record, "pcie.link.gen.current", "pcie.link.gen.gpucurrent")),
        pcie_gen_max=to_int(record.get("pcie.link.gen.max")),
        pcie_width_current=to_int(record.get("pcie.link.width.current")),
        pcie_width_max=to_int(record.get("pcie.link.width.max")),
        throttle_reasons_active=reasons,
        mig_mode_current=to_bool(record.get("mig.mode.current")),
        mig_mode_pending=to_bool(record.get("mig.mode.pending")),
        inforom_ok=None if checksum is None else checksum.lower() == "valid",
        unknown_error_fields=[key for key, value in record.items() if is_unknown_error(value)],
        lost_fields=[key for key, value in record.items() if is_gpu_lost(value)],
        performance_state=clean(record.get("pstate")),
        utilization_gpu_pct=to_int(record.get("utilization.gpu")),
        fabric_state=clean(record.get("fabric.state")),
        fabric_status=clean(record.get("fabric.status")),
        pci_device_id=device_id[2:] if device_id and device_id.lower().startswith("0x") else device_id,
    )
