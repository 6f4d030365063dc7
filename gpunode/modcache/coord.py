"""Which host of a run builds a group: the first to plan it claims it; a failed build is remembered so that the
group's other hosts fail at once with its cause instead of each compiling again. The cross-host wait itself is the
store's group lock (a file lock, so it also holds between gpunode processes sharing a cache folder)."""

from __future__ import annotations

import threading

_guard = threading.Lock()
_builders: dict[tuple[str, str], str] = {}
_failures: dict[tuple[str, str], tuple[str, str, str]] = {}


def claim(root: str, path: str, host: str) -> str:
    """The host that builds this group in this run: `host` when it is the first to ask."""
    with _guard:
        return _builders.setdefault((root, path), host)


def record_failure(root: str, path: str, host: str, error: str, fix: str = "") -> None:
    with _guard:
        _failures[(root, path)] = (host, error, fix)


def failure(root: str, path: str) -> tuple[str, str, str] | None:
    """(host, error, fix) of this run's failed build of the group, if one failed."""
    with _guard:
        return _failures.get((root, path))
