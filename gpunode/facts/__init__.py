"""Host facts: one read-only probe script (facts.sh) and a parser for its output.

The names below are imported on first use: `gpunode.facts.sections` (what a playbook will read) must not wait for
the model's dataclasses to be made, which happens while the connections open."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    **dict.fromkeys(("ContainerInfo", "DkmsEntry", "Facts", "KernelInfo", "LockHolder", "Mount", "NvidiaInfo",
                     "OsInfo", "PackageManagerInfo", "PciGpu", "ProcessInfo", "StorageInfo"), "model"),
    "os_release_fields": "osrelease", "attach_loader": "parse", "parse_facts": "parse", "parse_os_release": "parse",
    "link_gen": "pci",
    "facts_script": "script", "facts_subshell": "script", "cloud_vendor": "vendor",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"gpunode.facts.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'gpunode.facts' has no attribute {name!r}")
