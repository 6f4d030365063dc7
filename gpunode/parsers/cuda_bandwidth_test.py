"""Read the CUDA sample bandwidthTest's output, and hand its pinned host<->device copies to the nvbandwidth judge.

The reader follows NVIDIA/cuda-samples@685709bfc75565392c7b2fd8d7c00d5166e25edd (the parent of 7d1730f, which removed
the sample), Samples/1_Utilities/bandwidthTest/bandwidthTest.cu:
- :159 ``[%s] - Starting...`` with ``CUDA Bandwidth Test`` (:49), :260 ``Running on...``, :267 `` Device %d: %s``,
  :289/:293/:297/:308 `` Quick Mode`` / `` Shmoo Mode`` / `` Range Mode``;
- printResultsReadable :939 `` %s Bandwidth, %i Device(s)`` (``Device to Host``, ``Host to Device``, ``Device to
  Device``: :84), :940 `` %s Memory Transfers`` (``PINNED``/``PAGEABLE``: :86), :946 ``   Transfer Size (Bytes)\\t
  Bandwidth(GB/s)``, :950/:953 ``   %u\\t\\t\\t%s%.1f`` per size;
- printResultsCSV :998 ``bandwidthTest-%s, Bandwidth = %.1f GB/s, Time = %.5f s, Size = %u bytes, NumDevsUsed = %d``
  (``H2D-Pinned``, ``D2H-Paged``, ``D2D`` ...);
- :168 ``Result = PASS`` / ``Result = FAIL``.
The same printf lines are in every release of the repository (b458dafc, CUDA 10.1, to 685709bf). Older toolkit
samples printed ``Bandwidth(MB/s)`` (seen in mpicbg-scicomp/gearshifft PR 82, CUDA 8 era, no longer in the
repository's history); such values are read as MB/s and divided by 1000 (that sample's exact megabyte is not
checked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.parsers.nvbandwidth import NvbMatrix, NvbRun

_START = re.compile(r"\[?CUDA Bandwidth Test\] - Starting")
_DEVICE = re.compile(r"^\s*Device (\d+): (.+?)\s*$")
_KIND = re.compile(r"^\s*(Device to Host|Host to Device|Device to Device) Bandwidth, (\d+) Device\(s\)")
_MEMORY = re.compile(r"^\s*(PINNED|PAGEABLE) Memory Transfers")
_HEAD = re.compile(r"Transfer Size \(Bytes\)\s+Bandwidth\((GB|MB)/s\)")
_ROW = re.compile(r"^\s*(\d+)\s+([0-9.]+)\s*$")
_CSV = re.compile(r"bandwidthTest-(H2D|D2H|D2D)(?:-(Pinned|Paged))?[\w-]*, Bandwidth = ([0-9.]+) GB/s, .*"
                  r"Size = (\d+) bytes, NumDevsUsed = (\d+)")
_RESULT = re.compile(r"^Result = (PASS|FAIL)")
_DIRECTION = {"Host to Device": "h2d", "Device to Host": "d2h", "Device to Device": "d2d",
              "H2D": "h2d", "D2H": "d2h", "D2D": "d2d"}
_TESTCASE = {"h2d": "host_to_device_memcpy_ce", "d2h": "device_to_host_memcpy_ce"}


@dataclass
class BwResult:
    """One table (or CSV line) of results: direction, memory kind, devices summed, (bytes, GB/s) per size."""

    direction: str
    memory: str
    devices: int
    sizes: list[tuple[int, float]] = field(default_factory=list)

    @property
    def best(self) -> float | None:
        """The largest size's bandwidth (GB/s)."""
        return max(self.sizes)[1] if self.sizes else None


@dataclass
class BandwidthTestRun:
    """What one bandwidthTest run printed."""

    devices: dict[int, str] = field(default_factory=dict)
    results: list[BwResult] = field(default_factory=list)
    passed: bool | None = None


def is_bandwidth_test(text: str) -> bool:
    """Whether text holds bandwidthTest output: its banner, a results heading with its table head, or a CSV line."""
    return bool(_START.search(text) or _CSV.search(text) or (
        re.search(r"(?:Device to Host|Host to Device|Device to Device) Bandwidth, \d+ Device", text)
        and _HEAD.search(text)))


def parse_bandwidth_test(text: str) -> BandwidthTestRun:
    """Read a bandwidthTest output (readable or --csv)."""
    run = BandwidthTestRun()
    current: BwResult | None = None
    scale = 1.0
    for raw in text.splitlines():
        line = raw.strip()
        if m := _KIND.match(line):
            current = BwResult(_DIRECTION[m[1]], "PINNED", int(m[2]))
            run.results.append(current)
        elif (m := _MEMORY.match(line)) and current is not None:
            current.memory = m[1]
        elif m := _HEAD.search(line):
            scale = 1.0 if m[1] == "GB" else 1 / 1000
        elif (m := _ROW.match(line)) and current is not None:
            current.sizes.append((int(m[1]), round(float(m[2]) * scale, 3)))
        elif m := _CSV.search(line):
            memory = {"Pinned": "PINNED", "Paged": "PAGEABLE"}.get(m[2] or "", "PINNED")
            run.results.append(BwResult(_DIRECTION[m[1]], memory, int(m[5]), [(int(m[4]), float(m[3]))]))
        elif m := _RESULT.match(line):
            run.passed = m[1] == "PASS"
        elif (m := _DEVICE.match(raw)) and not line.startswith("Device to"):
            run.devices[int(m[1])] = m[2]
    return run


def as_nvbandwidth(run: BandwidthTestRun) -> NvbRun:
    """The pinned host-to-device and device-to-host copies of a one-device run as nvbandwidth's CE matrices (one row
    ``0``, one column per device), so the per-model floors judge them; summed multi-device results are left out."""
    converted = NvbRun(devices=dict(run.devices))
    device = min(run.devices, default=0)
    for result in run.results:
        testcase = _TESTCASE.get(result.direction)
        if testcase is None or result.memory != "PINNED" or result.devices != 1 or result.best is None:
            continue
        if converted.matrix(testcase) is None:
            converted.matrices.append(NvbMatrix(f"bandwidthTest {result.direction} pinned (GB/s)", testcase,
                                                [device], [(0, [result.best])], result.best))
    return converted


def describe(run: BandwidthTestRun) -> str:
    """One line: devices and the best value of each table."""
    names = ", ".join(dict.fromkeys(run.devices.values())) or "device not shown"
    values = "; ".join(f"{r.direction} {r.memory.lower()} {r.best} GB/s" for r in run.results if r.best is not None)
    verdict = {True: ", Result = PASS", False: ", Result = FAIL", None: ""}[run.passed]
    return f"bandwidthTest on {names}: {values or 'no result table'}{verdict}"
