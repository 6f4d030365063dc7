"""The GPU model catalogue (gpu_models.yaml): each model's nvidia-smi names, PCI id, memory, host link and NVLink, every
fact with its source; `identify` turns a name from a capture or `--expect-model` into one model, or None."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

_CATALOG = Path(__file__).parent / "gpu_models.yaml"
FACTS = ("name", "device_id", "memory_gb", "pcie_gen", "pcie_width", "min_width", "nvlink_gbs")


@dataclass(frozen=True)
class GpuModel:
    """One catalogued GPU model; `facts` keeps each fact's entry (value, source id, line, quote)."""

    key: str
    label: str
    form: str                      # "pcie" or "sxm"
    names: tuple[str, ...]         # as nvidia-smi / NVML print them
    aliases: tuple[str, ...]       # what a user may type with --expect-model
    facts: dict[str, dict[str, Any]] = field(hash=False, compare=False)
    clouds: tuple[dict[str, Any], ...] = ()
    nvlink_all_to_all: bool = False

    def value(self, fact: str) -> Any:
        """A fact's value, or None when the catalogue has no source for it."""
        entry = self.facts.get(fact)
        return None if entry is None else entry.get("v")

    def cite(self, fact: str) -> str:
        """Where a fact was read: `repo@commit12:path:line`, a URL, or this repository's capture file and line."""
        entry = self.facts[fact]
        return cite(entry)


@cache
def _data() -> dict[str, Any]:
    return dict(yaml.safe_load(_CATALOG.read_text(encoding="utf-8")))


def sources() -> dict[str, dict[str, str]]:
    """The catalogue's source ids: a repository at a commit, a page, or this repository's captures."""
    return dict(_data()["sources"])


def cite(entry: dict[str, Any]) -> str:
    """A fact entry's source as text a reviewer can open."""
    src = sources()[entry["src"]]
    if src.get("url"):
        return str(src["url"])
    where = f"{src['path']}{entry.get('file', '')}" if entry["src"] != "capture" else str(entry["file"])
    where += f":{entry['line']}" if entry.get("line") else ""
    return f"{src['repo']}@{src['commit'][:12]}:{where}" if src.get("repo") else where


@cache
def models() -> tuple[GpuModel, ...]:
    """Every catalogued model, in the catalogue's order."""
    found = []
    for raw in _data()["models"]:
        facts = {name: dict(raw[name]) for name in FACTS if raw.get(name)}
        found.append(GpuModel(str(raw["key"]), str(raw["label"]), str(raw["form"]), tuple(raw["names"]),
                              tuple(raw.get("aliases", ())), facts, tuple(raw.get("clouds", ())),
                              bool(raw.get("nvlink_all_to_all", False))))
    return tuple(found)


def by_key(key: str) -> GpuModel:
    """The model with this key (KeyError when none)."""
    for model in models():
        if model.key == key:
            return model
    raise KeyError(key)


def _norm(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.strip().upper())


def _strip_brand(text: str) -> str:
    return re.sub(r"^(NVIDIA |TESLA )+", "", text)


def identify(text: str | None) -> GpuModel | None:
    """The one model a GPU name or `--expect-model` value names: an nvidia-smi name or alias, whole or inside a longer
    line (the longest that fits, on word boundaries); None when none or several fit ("H100" alone is ambiguous)."""
    if not text:
        return None
    wanted = _strip_brand(_norm(text))
    exact = [m for m in models() for n in (*m.names, *m.aliases) if _strip_brand(_norm(n)) == wanted]
    if exact:
        return exact[0] if len({m.key for m in exact}) == 1 else None
    hits: list[tuple[int, GpuModel]] = []
    for model in models():
        for name in (*model.names, *model.aliases):
            needle = _strip_brand(_norm(name))
            if re.search(rf"(?<![A-Z0-9]){re.escape(needle)}(?![A-Z0-9])", wanted):
                hits.append((len(needle), model))
    if not hits:
        return None
    longest = max(length for length, _ in hits)
    best = {m.key: m for length, m in hits if length == longest}
    return next(iter(best.values())) if len(best) == 1 else None
