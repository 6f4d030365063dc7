"""Parse nvidia-smi's MIG listings: the mode query, `nvidia-smi mig -lgi`, `-lci`, `-lgip`, and the processes on
each GPU (`--query-compute-apps`).

The tables are read by structure, not by column position: a row is a `|`-framed line whose words start with the GPU
index and hold `MIG <profile>`; the column widths change between drivers (52 to 81 columns in the captures under
tests/data/nvidia/mig/) and the Placement column is missing in early drivers. The empty forms
("No MIG-enabled devices found.", "No GPU instances found: Not Found", "No MIG-supported devices found.",
"... Not Supported") read as no rows; an error ("Failed to display ...: Insufficient Permissions", "NVIDIA-SMI has
failed ...") raises SmiParseError with a fix.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.smi_csv import csv_body, field_name
from gpunode.parsers.smi_values import clean, to_bool, to_int

MODE_FIELDS = ("index", "pci.bus_id", "name", "mig.mode.current", "mig.mode.pending")
APPS_FIELDS = ("gpu_bus_id", "pid", "process_name")

# nvidia-smi's words for "nothing to list" (not an error): MIG off everywhere, no instances, no MIG-capable GPU
_EMPTY = re.compile(r"^(?:No MIG-enabled devices found|No MIG-supported devices found|No (?:GPU|compute) instances "
                    r"found|No devices were found|No running processes found|.*\bNot Supported\b)", re.IGNORECASE)
_FAILED = re.compile(r"^(?:Failed to|Unable to|NVIDIA-SMI has failed|Insufficient Permissions|.*\bis not supported\b)",
                     re.IGNORECASE)
_FIX = ("run the listing as root on the host (`sudo nvidia-smi mig -lgi`); a driver that fails it needs its "
        "kernel module loaded (`nvidia-smi` alone must work first)")


@dataclass(frozen=True)
class MigMode:
    """One GPU's MIG mode (`--query-gpu=...,mig.mode.current,mig.mode.pending`); None: the GPU has no MIG."""

    index: int | None
    bus_id: str | None
    name: str | None
    current: bool | None
    pending: bool | None

    @property
    def capable(self) -> bool:
        """nvidia-smi prints [N/A] for both on a GPU without MIG."""
        return self.current is not None or self.pending is not None

    @property
    def change_pending(self) -> bool:
        """A mode was set that takes effect only after a GPU reset (or a reboot)."""
        return self.capable and self.current != self.pending


@dataclass(frozen=True)
class GpuInstance:
    """A row of `nvidia-smi mig -lgi`."""

    gpu: int
    profile: str          # "1g.10gb", "1g.10gb+me" (the "MIG " prefix taken off)
    profile_id: int
    instance_id: int
    placement: str = ""   # "start:size"; "" where the driver does not print it


@dataclass(frozen=True)
class ComputeInstance:
    """A row of `nvidia-smi mig -lci`."""

    gpu: int
    gpu_instance_id: int
    profile: str          # "1g.10gb" (the whole GPU instance) or "1c.3g.40gb" (a share of it)
    profile_id: int
    instance_id: int
    placement: str = ""


@dataclass(frozen=True)
class GpuInstanceProfile:
    """A profile of `nvidia-smi mig -lgip`: how many of it the GPU can hold, and how many more it can hold now."""

    gpu: int
    name: str             # "3g.40gb"
    profile_id: int
    free: int
    total: int
    memory_gib: float | None = None


@dataclass(frozen=True)
class GpuProcess:
    """A row of `--query-compute-apps`: a process holding a GPU (a MIG GPU's processes name the parent GPU)."""

    gpu: str              # the GPU as the query named it: its bus id or its UUID
    pid: int | None
    name: str


def parse_mig_modes(text: str, fields: Sequence[str] = MODE_FIELDS) -> list[MigMode]:
    """The mode query's rows. With a header (`--format=csv`) the columns are found by name, in any order and among
    any other fields; without one (`noheader`) they are `fields`, in that order."""
    records = _csv_records(text, fields)
    return [MigMode(index=to_int(r.get("index")), bus_id=clean(r.get("pci.bus_id")),
                    name=clean(r.get("name") or r.get("gpu_name")), current=to_bool(r.get("mig.mode.current")),
                    pending=to_bool(r.get("mig.mode.pending"))) for r in records]


def parse_gpu_instances(text: str) -> list[GpuInstance]:
    """`nvidia-smi mig -lgi`: GPU, "MIG <profile>", profile ID, instance ID[, start:size]."""
    found = []
    for words in _rows(text, "GPU instances"):
        gpu, name, rest = words[0], words[2], words[3:]
        if len(rest) < 2 or not (rest[0].isdigit() and rest[1].isdigit()):
            raise _bad("a GPU instance row has no profile and instance IDs", words)
        found.append(GpuInstance(int(gpu), name, int(rest[0]), int(rest[1]), _placement(rest[2:])))
    return found


def parse_compute_instances(text: str) -> list[ComputeInstance]:
    """`nvidia-smi mig -lci`: GPU, GPU instance ID, "MIG <profile>", profile ID, instance ID[, start:size]."""
    found = []
    for words in _rows(text, "Compute instances", before=2):
        gpu, gi, name, rest = words[0], words[1], words[3], words[4:]
        if len(rest) < 2 or not (rest[0].isdigit() and rest[1].isdigit()):
            raise _bad("a compute instance row has no profile and instance IDs", words)
        found.append(ComputeInstance(int(gpu), int(gi), name, int(rest[0]), int(rest[1]), _placement(rest[2:])))
    return found


def parse_gpu_instance_profiles(text: str) -> list[GpuInstanceProfile]:
    """`nvidia-smi mig -lgip`: GPU, "MIG <name>", ID, free/total, memory GiB, ... (the second line of each
    profile, CE/JPEG/OFA, has no "MIG" and is skipped)."""
    found = []
    for words in _rows(text, "GPU instance profiles"):
        rest = words[3:]
        counts = rest[1].split("/") if len(rest) > 1 else []
        if len(counts) != 2 or not all(c.isdigit() for c in counts):
            raise _bad("a profile row has no Free/Total count", words)
        memory = rest[2] if len(rest) > 2 else ""
        found.append(GpuInstanceProfile(int(words[0]), words[2], int(rest[0]), int(counts[0]), int(counts[1]),
                                        float(memory) if re.fullmatch(r"\d+(?:\.\d+)?", memory) else None))
    return found


def parse_gpu_processes(text: str, fields: Sequence[str] = APPS_FIELDS) -> list[GpuProcess]:
    """`--query-compute-apps`: the GPU (bus id or UUID) and pid of each process; "No running processes found"
    (or nothing) is none."""
    records = _csv_records(text, fields)
    return [GpuProcess(gpu=clean(r.get("gpu_bus_id") or r.get("gpu_uuid")) or "", pid=to_int(r.get("pid")),
                       name=(r.get("process_name") or "").strip()) for r in records]


# ---- structure ---------------------------------------------------------------------------------------------------
def _rows(text: str, title: str, before: int = 1) -> list[list[str]]:
    """The words of each data row of a `|`-framed listing: rows whose first `before` words are numbers and whose
    next word is "MIG". Raises on an error message or on text that is neither a listing nor an empty form."""
    rows, framed, loose = [], False, []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or set(line) <= set("+-=|"):
            continue
        if not line.startswith("|"):
            loose.append(line)
            continue
        framed = True
        words = line.strip("|").split()
        if len(words) > before + 1 and all(w.isdigit() for w in words[:before]) and words[before] == "MIG":
            rows.append(words)
    if not framed:
        _empty_or_error(loose, title)
    return rows


def _empty_or_error(lines: list[str], title: str) -> None:
    """No table: fine when nvidia-smi said there is nothing to list, else an error naming what it printed."""
    if not lines or any(_EMPTY.match(line) and not _FAILED.match(line) for line in lines):
        return
    shown = lines[0][:200]
    if any(_FAILED.match(line) for line in lines):
        raise SmiParseError(f"nvidia-smi could not list {title.lower()}: {shown}", fix=_FIX)
    raise SmiParseError(f"not a {title.lower()} listing: {shown}", fix=_FIX)


def _placement(words: list[str]) -> str:
    return words[0] if words and re.fullmatch(r"\d+:\d+", words[0]) else ""


def _bad(what: str, words: list[str]) -> SmiParseError:
    return SmiParseError(f"{what}: {' '.join(words)}", fix=_FIX)


def _csv_records(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a CSV query as {field: value}: by its header when it has one, else by `fields`."""
    body = csv_body(text)
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines or all(_EMPTY.match(line.strip()) for line in lines):
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    header = [field_name(name) for name in rows[0]]
    if set(header) & set(fields) and not any(_looks_like_value(h) for h in header):
        names, rows = header, rows[1:]
    else:
        names = list(fields)
    records = []
    for row in rows:
        if len(row) == 1 and _FAILED.match(row[0].strip()):
            raise SmiParseError(f"nvidia-smi failed: {row[0].strip()[:200]}", fix=_FIX)
        if len(row) < len(names) and names is not header:
            raise SmiParseError(f"a row with {len(row)} fields where {len(names)} were asked "
                                f"({', '.join(names)}): {', '.join(row)[:200]}", fix=_FIX)
        records.append(dict(zip(names, (value.strip() for value in row), strict=False)))
    return records


def _looks_like_value(word: str) -> bool:
    return bool(re.fullmatch(r"\d+|[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]", word))
