"""Read the CUDA sample p2pBandwidthLatencyTest's output and name the GPU pairs whose P2P copy is no faster than the
copy staged through the host.

The reader follows NVIDIA/cuda-samples@c94ff366aed18c797b8a85dfaac7817b0228b420,
Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu:
- :631 ``[%s]`` with ``P2P (Peer-to-Peer) GPU Bandwidth Latency Test``; :638 ``Device: %d, %s, pciBusID: %x,
  pciDeviceID: %x, pciDomainID:%x``; :115 ``Device=%d %s Access Peer Device=%d`` (``CAN``/``CANNOT``);
- :649-670 ``P2P Connectivity Matrix``, a ``D\\D`` header and one row per GPU (``%6d\\t`` then ``%6d`` per peer, 1 when
  cudaDeviceCanAccessPeer says so);
- :673 ``Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)``, :675 ``Unidirectional P2P=Enabled Bandwidth (P2P
  Writes) Matrix (GB/s)``, :678 ``... (P2P Reads) ...`` (with --p2p_read), :681 ``Bidirectional P2P=Disabled
  Bandwidth Matrix (GB/s)``, :683 ``Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)``, each a ``   D\\D`` header
  (:256-262, :409-415) and rows ``%6d `` then ``%6.02f `` per column (:265-271); the latency matrices (:686-691,
  ``   GPU`` / ``   CPU`` headers, :549-582) are not read.
Without peer access the copy is cudaMemcpyPeerAsync (performP2PCopy :123-149, :146), which "falls back to normal
memcopy procedure" (the sample's own note, :119); an enabled pair that is no faster than that did not get a working
P2P path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.parsers.model import Finding
from gpunode.parsers.nvbandwidth import NvbMatrix, NvbRun

_BANNER = "P2P (Peer-to-Peer) GPU Bandwidth Latency Test"
_DEVICE = re.compile(r"^Device: (\d+), (.+), pciBusID: ([0-9a-fA-F]+), pciDeviceID: ([0-9a-fA-F]+), "
                     r"pciDomainID:([0-9a-fA-F]+)")
_ACCESS = re.compile(r"^Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
_TITLE = re.compile(r"^(Unidirectional|Bidirectional) P2P=(Disabled|Enabled) Bandwidth(?: \(P2P (Writes|Reads)\))? "
                    r"Matrix \(GB/s\)")
_CONNECTIVITY = "P2P Connectivity Matrix"
_NO_GAIN = 1.1  # enabled must beat disabled by more than this factor to count as a working P2P path
_REMEDY = ("Check the pair's link: `nvidia-smi topo -m` / `topo -p2p r` (NVLink NV#, or PCIe PIX/PXB), "
           "`nvidia-smi nvlink -s`, the IOMMU / ACS setting (P2P over PCIe needs ACS off on the switches, "
           "iommu=pt), and on NVSwitch systems that nvidia-fabricmanager is running.")


@dataclass
class P2pRun:
    """What one p2pBandwidthLatencyTest run printed: devices, peer access, the bandwidth matrices by title key."""

    devices: dict[int, str] = field(default_factory=dict)
    bus_ids: dict[int, str] = field(default_factory=dict)
    access: dict[tuple[int, int], bool] = field(default_factory=dict)
    matrices: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)  # "uni-disabled" ... -> cells

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.devices.values()))


def is_p2p_test(text: str) -> bool:
    """Whether text holds p2pBandwidthLatencyTest output: its banner or one of its bandwidth matrix titles."""
    return _BANNER in text or any(_TITLE.match(line.strip()) for line in text.splitlines())


def _key(m: re.Match[str]) -> str:
    return f"{m[1][:3].lower()}-{m[2].lower()}" + (f"-{m[3].lower()}" if m[3] else "")


def parse_p2p_test(text: str) -> P2pRun:
    """Read a p2pBandwidthLatencyTest output (elided lines and markdown fences around it tolerated)."""
    run = P2pRun()
    current: dict[tuple[int, int], float] | None = None
    columns: list[int] = []
    connectivity = False
    for raw in text.splitlines():
        line = raw.strip()
        tokens = line.split()
        if m := _DEVICE.match(line):
            run.devices[int(m[1])] = m[2]
            run.bus_ids[int(m[1])] = f"{int(m[5], 16):04x}:{int(m[3], 16):02x}:{int(m[4], 16):02x}"
        elif m := _ACCESS.match(line):
            run.access[(int(m[1]), int(m[3]))] = m[2] == "CAN"
        elif m := _TITLE.match(line):
            current, columns, connectivity = run.matrices.setdefault(_key(m), {}), [], False
        elif line == _CONNECTIVITY:
            current, columns, connectivity = None, [], True
        elif tokens and tokens[0] == "D\\D":
            columns = [int(t) for t in tokens[1:] if t.isdigit()]
        elif columns and (connectivity or current is not None) and len(tokens) == len(columns) + 1 \
                and tokens[0].isdigit():
            _row(run, current if not connectivity else None, columns, tokens)
        elif tokens and tokens[0] in ("GPU", "CPU") or line.startswith("P2P=") or line.startswith("NOTE"):
            current, columns, connectivity = None, [], False
    return run


def _row(run: P2pRun, matrix: dict[tuple[int, int], float] | None, columns: list[int], tokens: list[str]) -> None:
    """One matrix row: into the bandwidth matrix being read, else (the connectivity matrix) into run.access."""
    row = int(tokens[0])
    for column, cell in zip(columns, tokens[1:], strict=True):
        if matrix is not None:
            if re.fullmatch(r"[0-9.]+", cell):
                matrix[(row, column)] = float(cell)
        elif cell in ("0", "1") and row != column:
            run.access.setdefault((row, column), cell == "1")


def _pair(run: P2pRun, a: int, b: int) -> str:
    def one(i: int) -> str:
        bus = run.bus_ids.get(i)
        return f"GPU {i}" + (f" ({bus})" if bus else "")
    return f"{one(a)} <-> {one(b)}"


def _compared(run: P2pRun) -> tuple[str, dict[tuple[int, int], tuple[float, float]]]:
    """(which matrices, {pair: (disabled, enabled)}) from the bidirectional matrices, else the unidirectional ones."""
    for label, off, on in (("bidirectional", "bid-disabled", "bid-enabled"),
                           ("unidirectional writes", "uni-disabled", "uni-enabled-writes")):
        disabled, enabled = run.matrices.get(off), run.matrices.get(on)
        if disabled and enabled:
            pairs = {(a, b): (disabled[(a, b)], enabled[(a, b)]) for (a, b) in enabled
                     if a < b and (a, b) in disabled}
            return label, pairs
    return "", {}


def p2p_findings(run: P2pRun) -> list[Finding]:
    """Pairs whose P2P copy is no faster than the host-staged copy: critical when the driver said the pair can use
    P2P, a warning when it said it cannot (no P2P path between them); an ok finding when every pair gains."""
    label, pairs = _compared(run)
    if not pairs:
        return []
    slow = {p: v for p, v in pairs.items() if v[1] <= v[0] * _NO_GAIN}
    broken = [p for p in slow if run.access.get(p, run.access.get((p[1], p[0]), True))]
    absent = [p for p in slow if p not in broken]
    model = ", ".join(run.models) or "GPU model not shown"
    found: list[Finding] = []

    def listed(group: list[tuple[int, int]]) -> str:
        shown = "; ".join(f"{_pair(run, a, b)} {pairs[(a, b)][1]:g} vs {pairs[(a, b)][0]:g} GB/s"
                          for a, b in sorted(group)[:6])
        return shown + (f" and {len(group) - 6} more" if len(group) > 6 else "")

    if broken:
        found.append(Finding(
            "p2p-not-working", "critical",
            f"P2P not working for {len(broken)} GPU pair(s) ({model}): with P2P enabled the copy is no faster than "
            f"through the host ({label}): {listed(broken)}",
            f"p2pBandwidthLatencyTest P2P=Enabled vs P2P=Disabled {label} matrices; the driver reports peer access",
            _REMEDY, ", ".join(f"{a}-{b}" for a, b in sorted(broken))))
    if absent:
        found.append(Finding(
            "p2p-unavailable", "warning",
            f"No P2P path for {len(absent)} GPU pair(s) ({model}): the driver says CANNOT Access Peer, so copies "
            f"between them go through host memory: {listed(absent)}",
            "p2pBandwidthLatencyTest 'Device=i CANNOT Access Peer Device=j' / P2P Connectivity Matrix 0",
            "Expected on GeForce cards, across CPU sockets and between GPUs without an NVLink/PCIe-switch path; on "
            "an NVLink or NVSwitch system it is a fault: " + _REMEDY, ", ".join(f"{a}-{b}" for a, b in sorted(absent))))
    if not found:
        gain = min(on / off for off, on in pairs.values() if off)
        found.append(Finding("p2p-working", "ok", f"P2P works for all {len(pairs)} GPU pair(s) ({model}): enabled "
                             f"is at least {gain:.1f}x the host-staged copy ({label})",
                             "p2pBandwidthLatencyTest P2P=Enabled vs P2P=Disabled matrices", "None needed."))
    return found


def as_nvbandwidth(run: P2pRun) -> NvbRun:
    """The P2P-enabled unidirectional matrices as nvbandwidth's device-to-device CE matrices (Writes -> write_ce,
    Reads -> read_ce; the diagonal and pairs without peer access N/A, as nvbandwidth prints them)."""
    converted = NvbRun(devices=dict(run.devices), bus_ids=dict(run.bus_ids))
    for key, testcase in (("uni-enabled-reads", "device_to_device_memcpy_read_ce"),
                          ("uni-enabled-writes", "device_to_device_memcpy_write_ce")):
        cells = run.matrices.get(key)
        if not cells:
            continue
        gpus = sorted({a for a, _ in cells} | {b for _, b in cells})
        rows = [(a, [None if a == b or not run.access.get((a, b), True) else cells.get((a, b)) for b in gpus])
                for a in gpus]
        converted.matrices.append(NvbMatrix(f"p2pBandwidthLatencyTest {key} (GB/s)", testcase, gpus, rows))
    return converted


def describe(run: P2pRun) -> str:
    """One line: devices, pairs with peer access, matrices read."""
    can = sum(1 for ok in run.access.values() if ok)
    names = ", ".join(run.models) or "devices not shown"
    return (f"p2pBandwidthLatencyTest on {len(run.devices) or '?'} GPU(s) ({names}): {can}/{len(run.access)} "
            f"directed pair(s) with peer access; matrices: {', '.join(run.matrices) or 'none'}")
