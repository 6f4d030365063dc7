"""The runner: hosts in parallel, steps in order per host."""

from __future__ import annotations

from typing import Any

__all__ = ["RunOptions", "run_playbook", "default_log_dir"]


def __getattr__(name: str) -> Any:
    """`run`'s names, imported on first use: `runner.early` must not wait for the host-run code to import."""
    if name in __all__:
        from gpunode.runner import run

        return getattr(run, name)
    raise AttributeError(f"module 'gpunode.runner' has no attribute {name!r}")
