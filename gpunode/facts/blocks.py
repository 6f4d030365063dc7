"""Reader for the line format of scripts/facts.sh (`@@kv`, `@@raw`, `@@end`)."""

from __future__ import annotations

from dataclasses import dataclass, field

MARKER = "@@gpunode-facts"


@dataclass
class Blocks:
    """The blocks of one facts.sh output, by kind and name."""

    version: int = 0
    complete: bool = False
    kv: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    raw: dict[str, list[str]] = field(default_factory=dict)

    def get(self, block: str, key: str, default: str = "") -> str:
        """The last value of `key` in kv block `block`."""
        values = self.kv.get(block, {}).get(key)
        return values[-1] if values else default

    def all(self, block: str, key: str) -> list[str]:
        """Every value of a repeated `key`, in output order."""
        return list(self.kv.get(block, {}).get(key, []))

    def text(self, name: str) -> str | None:
        """A raw block as text (lines joined with newlines), None when absent."""
        lines = self.raw.get(name)
        if lines is None:
            return None
        return "\n".join(lines) + "\n" if lines else ""

    def kv_names(self, prefix: str) -> list[str]:
        """Names of kv blocks starting with `prefix` (e.g. "pci ")."""
        return [name for name in self.kv if name.startswith(prefix)]

    def raw_names(self, prefix: str) -> list[str]:
        """Names of raw blocks starting with `prefix`."""
        return [name for name in self.raw if name.startswith(prefix)]


def read_blocks(text: str) -> Blocks:
    """Split facts.sh output into blocks; lines before the marker and stray lines are ignored."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    start = next((i for i, line in enumerate(lines) if line.split(" ")[0] == MARKER), None)
    if start is None:
        head = text.strip()[:80]
        raise ValueError(f"not gpunode facts output: no {MARKER!r} marker line (output starts {head!r})")
    blocks = Blocks(version=_int(lines[start][len(MARKER) :].strip()))
    kind, name = "", ""
    for line in lines[start + 1 :]:
        if line.startswith("@@"):
            if line == "@@end":
                blocks.complete = True
                break
            kind, _, name = line[2:].partition(" ")
            if kind == "kv":
                blocks.kv.setdefault(name, {})
            elif kind == "raw":
                blocks.raw.setdefault(name, [])
        elif kind == "raw" and line.startswith("|"):
            blocks.raw[name].append(line[1:])
        elif kind == "kv" and "=" in line:
            key, _, value = line.partition("=")
            if key.split() == [key]:  # non-empty, no whitespace (one C call: this loop is the parse's hot spot)
                blocks.kv[name].setdefault(key, []).append(value)
    return blocks


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def combine(first: str, more: str) -> str:
    """One facts.sh output from two: `first` up to its `@@end`, then `more` after its marker line (the sections
    `more` gathered later). Repeated kv blocks merge when read; `more` ends the result with its own `@@end`."""
    head, _, _ = first.partition("\n@@end\n")
    lines = more.split("\n")
    start = next((i for i, line in enumerate(lines) if line.split(" ")[0] == MARKER), None)
    if start is None:
        raise ValueError(f"not gpunode facts output: no {MARKER!r} marker line (output starts {more.strip()[:80]!r})")
    return head + "\n" + "\n".join(lines[start + 1:])
