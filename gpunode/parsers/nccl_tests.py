"""Parse the output of NVIDIA nccl-tests (all_reduce_perf, all_gather_perf, ...).

The recogniser follows the program that prints it, NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432:
- src/util.cu:625 the header ``# nThread %d nGpus %d minBytes %ld maxBytes %ld step: ...``;
- src/util.cu:687 the rank lines ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s``
  (``Group`` came with d313d20a2695 (2022-09-20); older output has none and a ``[0x%02x]`` bus id, both accepted);
- src/util.cu:749-758 the table header: size count type redop root time algbw busbw #wrong, out-of-place
  then in-place. ``root`` and ``#wrong`` came with 51af5572bf8e (2022-08-19, "Resync with NCCL 2.13");
  before it the header had no ``root`` and said ``error`` (a float); rows of both layouts parse.
- src/util.cu:777-778 ``# Out of bounds values : %d OK|FAILED`` and ``# Avg bus bandwidth    : %g``;
- src/util.cu:780 ``# Collective test concluded: %s`` (the program name), else the ``<coll>_perf`` command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(r"#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s+(.+?)\s*$")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_TABLE_HEAD = re.compile(r"#?\s*size\s+count\s+type\s+redop\s+(?:root\s+)?time\s+algbw\s+busbw\s+(?:#wrong|error)")
_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # mpirun --tag-output
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
# The collective each binary tests (src/<name>.cu), named by the ops it prints.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv",
               "gather", "scatter", "hypercube")
_CONCLUDED = re.compile(r"Collective test concluded:\s*(\w+?)(?:_perf\w*)?\s*$")
_BINARY = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf")


@dataclass
class NcclRow:
    """One message size: bytes, data type, redop, and the out-of-place / in-place measures."""

    size: int
    count: int
    dtype: str
    redop: str
    busbw_out: float
    busbw_in: float
    algbw_out: float
    wrong_out: int | None
    wrong_in: int | None

    @property
    def busbw(self) -> float:
        """The better of out-of-place and in-place bus bandwidth (GB/s)."""
        return max(self.busbw_out, self.busbw_in)


@dataclass
class NcclRun:
    """What one nccl-tests run printed."""

    collective: str | None = None
    n_gpus_per_thread: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    ranks: list[tuple[int, str, int, str]] = field(default_factory=list)  # (rank, host, device, model)
    rows: list[NcclRow] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None

    @property
    def models(self) -> list[str]:
        """The GPU models the rank lines name, in order of first appearance."""
        return list(dict.fromkeys(r[3] for r in self.ranks))

    @property
    def hosts(self) -> list[str]:
        """The hosts the rank lines name."""
        return list(dict.fromkeys(r[1] for r in self.ranks))

    @property
    def n_ranks(self) -> int:
        """Number of distinct ranks (GPUs) in the run."""
        return len({r[0] for r in self.ranks})

    @property
    def wrong(self) -> int:
        """Sum of the #wrong columns (0 when none reported)."""
        return sum((r.wrong_out or 0) + (r.wrong_in or 0) for r in self.rows)

    def max_busbw(self, largest: int = 3) -> float | None:
        """The highest bus bandwidth among the `largest` biggest message sizes."""
        rows = sorted(self.rows, key=lambda r: r.size)[-largest:]
        return max((r.busbw for r in rows), default=None)

    def busbw_at(self, size: int) -> float | None:
        """Bus bandwidth measured at exactly `size` bytes, if that size was run."""
        return max((r.busbw for r in self.rows if r.size == size), default=None)


def is_nccl_tests(text: str) -> bool:
    """Whether text holds nccl-tests output: its table header, or its header line and the avg line."""
    return bool(_TABLE_HEAD.search(text) or (_HEADER.search(text) and _AVG.search(text)))


def starts_nccl_tests(text: str) -> bool:
    """Whether text opens an nccl-tests run (its ``# nThread ... nGpus ...`` header, src/util.cu:625) whose table
    comes later, after NCCL_DEBUG=INFO lines and blank lines."""
    return any(_HEADER.match(_PREFIX.sub("", line).strip()) for line in text.splitlines()[:3])


def _int(token: str) -> int | None:
    return int(token) if token.isdigit() else None


def _row(tokens: list[str]) -> NcclRow | None:
    if len(tokens) < 12 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    rest = tokens[4:]
    if len(rest) == 9:  # root column (added with rooted collectives; absent in old releases)
        rest = rest[1:]
    if len(rest) != 8 or not all(_NUMBER.match(t) for t in (rest[1], rest[2], rest[5], rest[6])):
        return None
    return NcclRow(int(tokens[0]), int(tokens[1]), tokens[2], tokens[3], float(rest[2]), float(rest[6]),
                   float(rest[1]), _int(rest[3]), _int(rest[7]))


def parse_nccl_tests(text: str) -> NcclRun:
    """Read a nccl-tests output (mpirun tag prefixes and markdown indentation tolerated)."""
    run = NcclRun()
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if m := _HEADER.match(line):
            run.n_gpus_per_thread, run.min_bytes, run.max_bytes = int(m[2]), int(m[3]), int(m[4])
        elif m := _RANK.match(line):
            run.ranks.append((int(m[1]), m[2], int(m[3]), m[4]))
        elif m := _OOB.match(line):
            run.out_of_bounds = int(m[1])
        elif m := _AVG.match(line):
            run.avg_busbw = float(m[1])
        elif m := _CONCLUDED.search(line):
            run.collective = run.collective or m[1]
        elif not line.startswith("#") and (row := _row(line.split())):
            run.rows.append(row)
        if run.collective is None and (m := _BINARY.search(line)):
            run.collective = m[1]
    return run


def with_program_line(run_text: str, whole: str) -> str:
    """run_text led by the line of `whole` that names the test binary, when run_text names none (a capture's
    command line often lands in a block of its own)."""
    if _BINARY.search(run_text) or _CONCLUDED.search(run_text):
        return run_text
    named = next((line for line in whole.splitlines() if _BINARY.search(line)), None)
    return f"{named}\n{run_text}" if named else run_text
