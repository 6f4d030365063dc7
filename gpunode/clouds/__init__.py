"""The image builders (`--builder`): every module of this package but `base` is one, found by name, no list kept.

Each defines `CLOUD` (a `gpunode.clouds.base.Cloud`); see docs/writing-clouds.md.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from gpunode.clouds.base import Base, Cloud, Plugin
from gpunode.errors import UsageError

__all__ = ["Base", "Cloud", "Plugin", "all_clouds", "bases_help", "builders_help", "cloud", "names"]


def names() -> list[str]:
    """The builders' names (their modules'), sorted, without importing them."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base" and not m.name.startswith("_"))


@cache
def all_clouds() -> dict[str, Cloud]:
    """name -> its plug-in; a module whose CLOUD is missing or misnamed fails loudly (a contributor's mistake)."""
    found: dict[str, Cloud] = {}
    for name in names():
        plugin = getattr(importlib.import_module(f"{__name__}.{name}"), "CLOUD", None)
        if not isinstance(plugin, Cloud) or plugin.name != name:
            raise TypeError(f"gpunode/clouds/{name}.py must define CLOUD, a Cloud whose name is {name!r}")
        found[name] = plugin
    return found


def cloud(name: str) -> Cloud:
    """The plug-in of `--builder NAME`; a usage error naming the builders there are."""
    if name not in names():
        raise UsageError(f"unknown builder {name!r}", fix=f"use one of: {', '.join(names())}")
    return all_clouds()[name]


def _and(items: list[str]) -> str:
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else "".join(items)


def bases_help(builders: list[str] | None = None) -> str:
    """The --base help of these builders (default: all): the default base, the bases all of them have, then what each
    adds; a builder without the default base says so."""
    from gpunode.distros import DEFAULT_BASE

    chosen = [c for name, c in all_clouds().items() if builders is None or name in builders]
    shared = [name for name in chosen[0].bases if all(name in c.bases for c in chosen)]
    said = [f"{DEFAULT_BASE} (default)", *(name for name in shared if name != DEFAULT_BASE)]
    if len(chosen) == 1:
        return f"base image: {', '.join(said)}"
    return f"base image: {', '.join(said)}; {'; '.join(_extras(chosen, {*shared, DEFAULT_BASE}, DEFAULT_BASE))}"


def _extras(chosen: list[Cloud], said: set[str], default: str) -> list[str]:
    """What each builder adds to the bases already said, and the builders without the default base."""
    extra = []
    for cloud in chosen:
        own = [name for name in cloud.bases if name not in said]
        if own:
            extra.append(f"{cloud.name} also {_and(own)}")
    lacking = [c.name for c in chosen if default not in c.bases]
    if lacking:
        extra.append(f"{_and(lacking)} {'has' if len(lacking) == 1 else 'have'} no {default}: give --base")
    return extra


def builders_help(default: str) -> str:
    """The --builder help: each builder with its one line."""
    return "; ".join(f"{c.name}{' (default)' if c.name == default else ''}: {c.summary}"
                     for c in all_clouds().values()) + " (aws: build-ami has its launch template and Batch options)"
