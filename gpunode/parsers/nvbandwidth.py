"""Parse the text output of NVIDIA nvbandwidth (host<->device and device<->device copy bandwidth matrices).

The recogniser follows the program that prints it, NVIDIA/nvbandwidth@66746a3bef61c8c2e12ab34955310da70b9e38cb (v0.8):
- output.cpp:31-32 ``nvbandwidth Version: %s`` and ``Built from Git version: %s``;
- output.cpp:49-51 ``CUDA Runtime Version: %d``, ``CUDA Driver Version: %d``, ``Driver Version: %s``;
- output.cpp:159-165 the host name on a line of its own, then ``Device %d: <name> (<domain>:<bus>:<device>)``
  (output.cpp:79-97; the bus id came with v0.5, d30ed1e; v0.2-v0.4 print the name only: 67daa2d nvbandwidth.cpp:199);
- output.cpp:175-186 ``Running <testcase>.`` before a test, ``Waived: `` or ``Error: <msg>`` instead of results
  (nvbandwidth.cpp:158-175; v0.2-v0.4 printed ``Waiving <testcase>.``);
- output.cpp:188-191 a description line (testcases_ce.cpp:36 ``memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)``,
  testcases_ce.cpp:50 ``... CPU(row) <- GPU(column) ...``, testcases_ce.cpp:112 ``memcpy CE GPU(row) -> GPU(column)``,
  testcases_ce.cpp:172-174 bidirectional ``Read1``/``Read2``/``Total`` matrices, testcases_sm.cpp the ``memcpy SM``
  ones, testcases_sm.cpp:34 and :141 the latency ones in ``(ns)``), then the matrix printed ``std::fixed``
  with 2 decimals (output.cpp:190);
- inline_common.h:55-113 the matrix: a header of column indices (``setw(10)`` each), one row per source (host
  to/from device tests: one row ``0`` and a column per GPU, testcases_ce.cpp:26; device to device: a row and a
  column per GPU, testcases_ce.cpp:91, diagonal and peers without access ``N/A``), a blank line, then
  ``SUM <testcase key> <sum>`` (or ``&&&& PERF <key> <sum> +GB/s`` with --perfFormatter, inline_common.h:104-105).
  Row labels were printed unpadded before v0.5 (67daa2d common.h:212), ``setw(2)`` since.
Output of v0.10 seen in the wild adds ``COEFFICIENT_OF_VARIATION <key> <value>`` lines after SUM and prints the
CUDA versions as ``13.3 (13030)``; both are tolerated (the fetched v0.8 source has neither).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_VERSION = re.compile(r"^nvbandwidth Version:\s*(\S+)")
_DRIVER = re.compile(r"^Driver Version:\s*(\S+)")
_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F]{8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?\s*$")
_RUNNING = re.compile(r"^Running (?:benchmark )?(\w+)\.\s*$")
_WAIVED = re.compile(r"^(?:Waived:|Waiving (\w+)\.)")
_DESCRIPTION = re.compile(r"^(?:memcpy|memory latency|Device to Device Latency|multicast)\b.*\((GB/s|ns)\)\s*$")
_TOTAL = re.compile(r"^(?:SUM|&&&& PERF) (\w+) (-?[0-9.]+)")
_FAILED = re.compile(r"^(?:ASSERT in |Error: |ERROR: |Invalid value when checking|.*\bnot found!)")
_KEY = re.compile(r"memcpy|latency|local_copy|_(?:ce|sm|tma)$")
_OWN_LINE = re.compile(r"^(?:CUDA Runtime Version|CUDA Driver Version|Driver Version|Built from Git version|"
                       r"Device \d+: |Running |Waived|Waiving |NOTE: |Performance can vary|Additional system-specific|"
                       r"COEFFICIENT_OF_VARIATION |ASSERT in |Invalid value when|Current offset|Error: )")
_CELL = re.compile(r"^(?:-?\d+(?:\.\d+)?|N/A)$")

# The copy direction each unidirectional per-GPU testcase measures (testcase.h keys); others are "other".
DIRECTIONS = {"host_to_device_memcpy_ce": "h2d", "host_to_device_memcpy_sm": "h2d",
              "device_to_host_memcpy_ce": "d2h", "device_to_host_memcpy_sm": "d2h",
              "device_to_device_memcpy_read_ce": "d2d", "device_to_device_memcpy_write_ce": "d2d",
              "device_to_device_memcpy_read_sm": "d2d", "device_to_device_memcpy_write_sm": "d2d"}
_BY_DESCRIPTION = ((re.compile(r"CPU\(row\) -> GPU"), "h2d"), (re.compile(r"CPU\(row\) <- GPU"), "d2h"),
                   (re.compile(r"GPU\(row\) (?:->|<-) GPU"), "d2d"))


@dataclass
class NvbMatrix:
    """One printed matrix: its description line, the testcase it belongs to, its cells (None for N/A)."""

    description: str
    testcase: str | None = None
    columns: list[int] = field(default_factory=list)
    rows: list[tuple[int, list[float | None]]] = field(default_factory=list)
    total: float | None = None

    @property
    def unit(self) -> str:
        """GB/s for bandwidth, ns for latency."""
        return "ns" if self.description.rstrip().endswith("(ns)") else "GB/s"

    @property
    def direction(self) -> str:
        """h2d, d2h or d2d for the per-GPU unidirectional tests, else "other" (bidirectional, all-to-one...)."""
        if self.testcase:
            return DIRECTIONS.get(self.testcase, "other")
        if self.unit != "GB/s" or "<->" in self.description or "All" in self.description:
            return "other"
        return next((d for pattern, d in _BY_DESCRIPTION if pattern.search(self.description)), "other")

    def cells(self) -> list[tuple[int, int, float]]:
        """(row, column, value) for each measured cell (N/A left out)."""
        return [(r, self.columns[i], v) for r, values in self.rows for i, v in enumerate(values) if v is not None]


@dataclass
class NvbRun:
    """What one nvbandwidth run printed."""

    version: str | None = None
    driver: str | None = None
    devices: dict[int, str] = field(default_factory=dict)  # index -> name (without the bus id)
    bus_ids: dict[int, str] = field(default_factory=dict)
    matrices: list[NvbMatrix] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # testcases announced by "Running X."
    waived: int = 0
    failures: list[str] = field(default_factory=list)  # ASSERT / Error lines

    @property
    def models(self) -> list[str]:
        """The GPU names the Device lines give, in order of first appearance."""
        return list(dict.fromkeys(self.devices.values()))

    def matrix(self, testcase: str) -> NvbMatrix | None:
        """The first matrix of a testcase, if it was printed."""
        return next((m for m in self.matrices if m.testcase == testcase), None)


def is_nvbandwidth(text: str) -> bool:
    """Whether text holds nvbandwidth output: its version line, a matrix description line, or a SUM line of a
    testcase key."""
    for raw in text.splitlines():
        line = _line(raw)
        if _VERSION.match(line) or _DESCRIPTION.match(line) or ((m := _TOTAL.match(line)) and _KEY.search(m[1])):
            return True
    return False


def continues_nvbandwidth(piece: str) -> bool:
    """Whether a piece cut at blank lines is more nvbandwidth output: every line one nvbandwidth prints (a host
    name may lead the Device lines, output.cpp:160)."""
    lines = [_line(raw) for raw in piece.splitlines() if raw.strip()]
    if len(lines) > 1 and re.fullmatch(r"[\w.-]+", lines[0]) and _DEVICE.match(lines[1]):
        lines = lines[1:]
    return bool(lines) and all(_OWN_LINE.match(line) or _numbers(line.split()[1:]) is not None
                               and line.split()[0].isdigit() for line in lines)


def _line(raw: str) -> str:
    """A line without markdown quote marks and surrounding blanks."""
    return re.sub(r"^\s*>+\s?", "", raw).strip() if raw.lstrip().startswith(">") else raw.strip()


def _numbers(tokens: list[str]) -> list[float | None] | None:
    if not all(_CELL.match(t) for t in tokens):
        return None
    return [None if t == "N/A" else float(t) for t in tokens]


def _matrix_line(matrix: NvbMatrix, line: str) -> bool:
    """Read one header or row line into matrix; False when the line is not part of it."""
    tokens = line.split()
    if not tokens:
        return False
    if not matrix.columns:
        if all(t.isdigit() for t in tokens):
            matrix.columns = [int(t) for t in tokens]
            return True
        return False
    values = _numbers(tokens[1:])
    if tokens[0].isdigit() and values is not None and len(values) == len(matrix.columns):
        matrix.rows.append((int(tokens[0]), values))
        return True
    return False


def parse_nvbandwidth(text: str) -> NvbRun:
    """Read an nvbandwidth text output (markdown quote marks tolerated)."""
    run = NvbRun()
    current: str | None = None
    open_matrix: NvbMatrix | None = None
    for raw in text.splitlines():
        line = _line(raw)
        if open_matrix is not None and _matrix_line(open_matrix, line):
            continue
        open_matrix = None
        if m := _VERSION.match(line):
            run.version = m[1]
        elif m := _DRIVER.match(line):
            run.driver = m[1]
        elif m := _DEVICE.match(line):
            run.devices[int(m[1])] = m[2]
            if m[3]:
                run.bus_ids[int(m[1])] = m[3]
        elif m := _RUNNING.match(line):
            current = m[1]
            run.started.append(current)
        elif _WAIVED.match(line):
            run.waived += 1
        elif _DESCRIPTION.match(line):
            open_matrix = NvbMatrix(line, current)
            run.matrices.append(open_matrix)
        elif (m := _TOTAL.match(line)) and run.matrices and run.matrices[-1].total is None:
            last = run.matrices[-1]
            last.total = float(m[2])
            if last.testcase is None or m[1] != last.testcase and not m[1].startswith(last.testcase):
                last.testcase = m[1]
        elif _FAILED.match(line):
            run.failures.append(line)
    return run
