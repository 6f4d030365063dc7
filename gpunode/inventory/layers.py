"""Variables with the file and line each one came from, in layers that merge by precedence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.errors import UsageError


@dataclass(frozen=True)
class Origin:
    """Where a value was written: a file (or a pseudo-source like "--limit") and a 1-based line."""

    source: str
    line: int | None = None


@dataclass
class VarLayer:
    """One set of variables (inline vars of a group, one group_vars file, ...) with per-key origins."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def set(self, key: str, value: Any, origin: Origin) -> None:
        self.values[key] = value
        self.origins[key] = origin


@dataclass
class Resolved:
    """Variables after merging layers: values, where each came from, and which layer won (higher wins)."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)
    rank: dict[str, int] = field(default_factory=dict)


def merge_layers(layers: list[VarLayer]) -> Resolved:
    """Merge layers low to high precedence; a later layer replaces a key whole (no deep dict merge)."""
    out = Resolved()
    for rank, layer in enumerate(layers):
        for key, value in layer.values.items():
            out.values[key] = value
            out.origins[key] = layer.origins[key]
            out.rank[key] = rank
    return out


def usage_error(origin: Origin, cause: str, fix: str) -> UsageError:
    """A UsageError located at ``origin``."""
    return UsageError(cause, fix=fix, source=origin.source, line=origin.line)
