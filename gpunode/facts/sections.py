"""facts.sh's sections: which ones a run gathers, and which `Facts` fields each one fills.

A run gathers `core` plus the sections its steps declare (`Step.facts_sections`); a field of a section that was
not gathered is gathered when first read (`Facts` asks its loader: the run lock's session), so a step that
reads more than it declares costs one more round trip, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpunode.templates_read import attributes_read

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


def sections_read_by(values: Iterable[Any], expressions: Iterable[str] = ()) -> frozenset[str]:
    """The sections that the templates in `values` (templated strings, nested in dicts and lists) and the Jinja
    `expressions` (`when:`) read through `facts` (gpunode/templates_read.py: Jinja's AST, not the text). `facts` read
    as a whole, by a computed key, or by a template that does not parse: all of them."""
    fields = attributes_read(list(values), "facts", expressions)
    if fields is None:
        return frozenset(OPTIONAL)
    return frozenset(section for name in fields for section in FIELD_SECTIONS.get(name, ()))
