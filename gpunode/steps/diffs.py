"""Diffs of planned changes, capped (Ansible's max_diff_size): a 20 MB file content never becomes a 20 MB diff.

A file step's diff is made only when it is shown (`render`), and never from more than a few times the cap: difflib on
two large texts is quadratic. What was cut is said in the diff's last line.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass

DEFAULT_MAX_DIFF_SIZE = 100 * 1024   # bytes per step, as Ansible's max_diff_size (104448)
DIFF_INPUT_FACTOR = 8                 # texts larger than this many caps are not given to difflib


@dataclass(frozen=True)
class FileDiff:
    """A whole-file change, diffed when it is rendered."""

    path: str
    old: str
    new: str

    def render(self, limit: int) -> str:
        if len(self.old) + len(self.new) <= DIFF_INPUT_FACTOR * limit:
            return cap(_unified(self.path, self.old, self.new), limit)
        if not self.old:  # a new file: its first lines are the diff's first lines
            lines = itertools.islice(self.new.splitlines(keepends=True), limit)
            head = _unified(self.path, "", "".join(lines))
            return cap(head, limit, total=len(self.new.encode("utf-8", errors="surrogateescape")))
        return (f"--- {self.path} (now)\n+++ {self.path} (planned)\n"
                f"(diff not computed: the file is {size(len(self.old))} now and {size(len(self.new))} planned, above "
                f"the diff limit of {size(limit)} per step; --max-diff-size raises it)\n")

    def __str__(self) -> str:
        return self.render(DEFAULT_MAX_DIFF_SIZE)

    def __contains__(self, text: str) -> bool:
        return text in str(self)


def render(diff: str | FileDiff, limit: int) -> str:
    """A diff as shown and reported: at most `limit` bytes, with a note of what was cut."""
    return diff.render(limit) if isinstance(diff, FileDiff) else cap(diff, limit)


def cap(text: str, limit: int, total: int | None = None) -> str:
    """`text` cut at `limit` bytes (at a line end where there is one), with a note of how much was left out."""
    data = text.encode("utf-8", errors="surrogateescape")
    total = max(total or 0, len(data))
    if total <= limit:
        return text
    kept = data[:limit]
    if b"\n" in kept:
        kept = kept[: kept.rindex(b"\n") + 1]
    shown = kept.decode("utf-8", errors="ignore")
    return (f"{shown}{'' if shown.endswith(chr(10)) or not shown else chr(10)}"
            f"... diff cut at {size(len(kept))} of {size(total)} (--max-diff-size raises the limit of {size(limit)} "
            f"per step)\n")


def size(count: int) -> str:
    """Bytes for people: 812 B, 100 KB, 20.0 MB."""
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count // 1024} KB"
    return f"{count / 1024 / 1024:.1f} MB"


def parse_size(text: str | int) -> int:
    """`--max-diff-size`: bytes, or with K/M (binary: 100K = 102400); raises ValueError with what is accepted."""
    value = str(text).strip().upper().removesuffix("B")
    factor = {"K": 1024, "M": 1024 * 1024}.get(value[-1:], 1)
    digits = value[:-1] if factor > 1 else value
    if not digits.isdigit() or int(digits) * factor <= 0:
        raise ValueError(f"--max-diff-size must be a positive size in bytes (e.g. 102400, 100K, 2M), got {text!r}")
    return int(digits) * factor


def _unified(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"{path} (now)", tofile=f"{path} (planned)"))
