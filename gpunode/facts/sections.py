"""facts.sh's sections: which ones a run gathers, and which `Facts` fields each one fills.

A run gathers `core` plus the sections its steps declare (`Step.facts_sections`); a field of a section that was
not gathered is gathered when first read (`Facts` asks its loader: the run lock's session), so a step that
reads more than it declares costs one more round trip, never a wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

CORE = "core"
OPTIONAL = ("pkgmgr", "packages", "gpu", "services", "containers", "storage", "virt")
ALL = frozenset((CORE, *OPTIONAL))

# Facts fields that need more than `core`; every other field is filled by `core`.
FIELD_SECTIONS: dict[str, frozenset[str]] = {
    "pkg": frozenset({"pkgmgr"}),
    "installed_packages": frozenset({"packages"}),
    "gpus": frozenset({"gpu"}),
    "nvswitch_present": frozenset({"gpu"}),
    "nvidia": frozenset({"gpu", "packages", "services"}),
    "containers": frozenset({"containers", "packages", "services"}),
    "storage": frozenset({"storage"}),
    "vm_virt": frozenset({"virt"}),
}


def normalize(sections: Iterable[str]) -> frozenset[str]:
    """The known sections among `sections`, with `core`; raises ValueError on an unknown name."""
    wanted = frozenset(sections)
    unknown = wanted - ALL
    if unknown:
        raise ValueError(f"unknown facts section(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(ALL))}")
    return wanted | {CORE}


def script_prefix(sections: Iterable[str]) -> str:
    """The shell line that makes facts.sh gather only `sections` (in facts.sh's own order)."""
    wanted = frozenset(sections)
    return "FACTS_WANT='" + " ".join(s for s in (CORE, *OPTIONAL) if s in wanted) + "'\n"


_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_FACTS_READ = re.compile(r"""\bfacts\b(?:\s*\.\s*(\w+)|\s*\[\s*['"](\w+)['"]\s*\])?""")


def sections_read_by(values: Iterable[Any], expressions: Iterable[str] = ()) -> frozenset[str]:
    """The sections that templates in `values` (strings, nested in dicts and lists: only `{{ }}` / `{% %}` parts)
    and Jinja `expressions` (`when:`) read through `facts`. `facts` read as a whole, or by a computed key: all."""
    texts = [m.group(0) for text in _strings(values) for m in _TEMPLATE.finditer(text)]
    wanted: set[str] = set()
    for text in [*texts, *(str(e) for e in expressions)]:
        for match in _FACTS_READ.finditer(text):
            field = match.group(1) or match.group(2)
            wanted |= FIELD_SECTIONS.get(field, frozenset()) if field else frozenset(OPTIONAL)
    return frozenset(wanted)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
