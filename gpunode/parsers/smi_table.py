"""Parse the plain `nvidia-smi` table (GPU rows only; MIG and process tables are ignored)."""

from __future__ import annotations

import re

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.model import GpuInfo, SmiReport
from gpunode.parsers.smi_values import clean, is_gpu_lost, is_unknown_error, normalize_bus_id, to_bool, to_float, to_int

_FIX = "capture the complete output again with `nvidia-smi > smi-table.txt`"
_BANNER = re.compile(r"\|\s*NVIDIA-SMI\s+(?P<smi>\S+)(?P<rest>.*)\|")
_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)")
_CUDA = re.compile(r"CUDA(?: UMD)? Version:\s*(\S+)")
# The persistence column reads WDDM / TCC / MCDM (the driver model) on Windows.
_ROW1_LEFT = re.compile(r"^\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<pers>On|Off|N/A|WDDM|TCC|MCDM)\s*$")
_ROW1_MID = re.compile(
    r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>\S+)\s*$")
_ROW2_LEFT = re.compile(
    r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<draw>\S+)\s*/\s*(?P<cap>\S+)\s*$")
_MEMORY = re.compile(r"^\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*$")
_ROW2_RIGHT = re.compile(r"^\s*(?P<util>\S+)\s+(?P<mode>.+?)\s*$")
# A GPU's first row: "|   0  NVIDIA A100 ...  On  | 00000000:07:00.0 Off |" (also in a fragment without banner).
TABLE_ROW = re.compile(r"^[ \t]*\|\s+\d+\s+.+?\s+(?:On|Off|N/A|WDDM|TCC|MCDM)\s*\|"
                       r"\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", re.M)
_INFOROM = re.compile(r"WARNING: infoROM is corrupted at gpu\s+(\S+)")


def parse_smi_table(text: str) -> SmiReport:
    """Parse plain `nvidia-smi` output into one GpuInfo per GPU row."""
    text = _dedent_box(text)
    banner = _BANNER.search(text)
    if banner is None and not TABLE_ROW.search(text):
        raise SmiParseError("no '| NVIDIA-SMI <version> ... |' banner line and no GPU row: not plain "
                            "`nvidia-smi` output", fix=_FIX)
    rest = banner.group("rest") if banner else ""
    driver = _DRIVER.search(rest)
    cuda = _CUDA.search(rest)
    driver_version = clean(driver.group(1)) if driver else None
    cuda_version = clean(cuda.group(1)) if cuda else None
    error_fields = [f"{name} Version: {match.group(1)}" for name, match in (("Driver", driver), ("CUDA", cuda))
                    if match and is_unknown_error(match.group(1))]
    missing: list[str] = []
    gpus = _gpu_rows(text, driver_version, cuda_version, missing)
    apply_inforom_warnings(gpus, text)
    return SmiReport(
        driver_version=driver_version,
        cuda_version=cuda_version,
        attached_gpus=None,
        gpus=gpus,
        source_kind="table",
        warnings=([] if banner else ["a fragment of the table: no NVIDIA-SMI banner, so no driver version"])
        + missing,
        missing=missing,
        error_fields=error_fields,
    )


def apply_inforom_warnings(gpus: list[GpuInfo], text: str) -> None:
    """Mark the GPUs named by nvidia-smi's "WARNING: infoROM is corrupted at gpu <bus id>" lines."""
    for match in _INFOROM.finditer(text):
        bad = normalize_bus_id(match.group(1))
        for gpu in gpus:
            if normalize_bus_id(gpu.pci_bus_id) == bad:
                gpu.inforom_ok = False


def _dedent_box(text: str) -> str:
    """The table as nvidia-smi printed it when a post indents it (a Markdown list, an rst code block)."""
    lines = text.splitlines()
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.lstrip(" \t")[:1] in ("|", "+")]
    cut = min(indents, default=0)
    if not cut:
        return text
    return "\n".join(line[cut:] if line[:cut].strip() == "" else line for line in lines) + "\n"


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def _gpu_rows(text: str, driver: str | None, cuda: str | None, missing: list[str]) -> list[GpuInfo]:
    """GPU rows are the box lines after the first '|====' rule, up to the first non-box line; a GPU whose rows
    are cut off is named in missing."""
    lines = text.splitlines()
    start = _rows_start(lines)
    if start is None:
        return []
    reader = _RowReader(driver, cuda)
    for line in lines[start + 1:]:
        if not line.startswith(("|", "+")):
            break
        if line.startswith("+"):  # the rule under a GPU's rows
            reader.current, reader.row = None, 0
            continue
        if line.strip() in ("|", "") and reader.current is not None:
            break
        reader.take(_cells(line))
    if reader.current is not None:
        lacking = " (no temperature, power and memory row)" if reader.row < 2 else ""
        missing.append(f"the table is cut off after GPU {reader.current.index}{lacking}: later GPUs may be missing")
    return reader.gpus


def _rows_start(lines: list[str]) -> int | None:
    """The index of the line just above the GPU rows: the first '|====' rule, or in a fragment the line above the
    first GPU row; None when there are no GPU rows."""
    start = next((i for i, line in enumerate(lines) if line.startswith("|=")), None)
    if start is not None:
        return start
    first = next((i for i, line in enumerate(lines) if TABLE_ROW.match(line)), None)
    return None if first is None else first - 1


def _is_lost(cells: list[str]) -> bool:
    """A cell reads as a lost GPU ("GPU is lost", "Requires reset" or the like)."""
    return any(is_gpu_lost(c.strip()) or c.strip() in ("GPU is lost", "Requires reset") for c in cells)


class _RowReader:
    """The GPUs read so far, the one whose rows are being read (`current`) and its row number (1 to 3)."""

    def __init__(self, driver: str | None, cuda: str | None) -> None:
        self.driver, self.cuda = driver, cuda
        self.gpus: list[GpuInfo] = []
        self.current: GpuInfo | None = None
        self.row = 0

    def take(self, cells: list[str]) -> None:
        """One box line's cells: a GPU's first row starts a GPU; its second and third rows add to it."""
        if self.current is not None and _is_lost(cells):
            self.current.lost_fields.append(f"table row {self.row + 1}")
        first = _ROW1_LEFT.match(cells[0]) if len(cells) >= 3 else None
        mid = _ROW1_MID.match(cells[1]) if first else None
        if first and mid:
            self.current = _first_row(first, mid, cells[2], self.driver, self.cuda)
            self.gpus.append(self.current)
            self.row = 1
        elif self.current is not None and len(cells) >= 3:
            self._later_row(self.current, cells)

    def _later_row(self, gpu: GpuInfo, cells: list[str]) -> None:
        """Row 2 (fan, temperature, power, memory, utilization) or row 3 (MIG mode); later rows are ignored."""
        if self.row == 1:
            _second_row(gpu, cells)
            self.row = 2
        elif self.row == 2:
            gpu.mig_mode_current = to_bool(cells[2])
            self.row = 3


def _first_row(first: re.Match[str], mid: re.Match[str], ecc: str, driver: str | None,
               cuda: str | None) -> GpuInfo:
    ecc_text = ecc.strip()
    errors = ["ecc_uncorrectable_volatile"] if is_unknown_error(ecc_text) else []
    return GpuInfo(
        index=int(first.group("index")),
        name=first.group("name").strip(),
        pci_bus_id=mid.group("bus"),
        driver_version=driver,
        cuda_version=cuda,
        persistence_mode=to_bool(first.group("pers")),
        ecc_mode=False if ecc_text == "Off" else (True if to_int(ecc_text) is not None else None),
        ecc_uncorrectable_volatile=to_int(ecc_text) if ecc_text != "Off" else None,
        unknown_error_fields=errors,
    )


def _second_row(gpu: GpuInfo, cells: list[str]) -> None:
    left = _ROW2_LEFT.match(cells[0])
    if left:
        for field_name, value in (("fan_speed", left.group("fan")), ("temperature", left.group("temp")),
                                  ("power_draw", left.group("draw")), ("power_limit", left.group("cap"))):
            if is_unknown_error(value):
                gpu.unknown_error_fields.append(field_name)
        gpu.temperature_c = to_int(left.group("temp"))
        gpu.performance_state = clean(left.group("perf"))
        gpu.power_draw_w = to_float(left.group("draw"))
        gpu.power_limit_w = to_float(left.group("cap"))
    memory = _MEMORY.match(cells[1])
    if memory:
        gpu.memory_used_mib = to_int(memory.group("used"))
        gpu.memory_total_mib = to_int(memory.group("total"))
    right = _ROW2_RIGHT.match(cells[2])
    if right:
        gpu.utilization_gpu_pct = to_int(right.group("util"))
