"""The `gpunode` console script."""

from gpunode.tasks import console_main as main

__all__ = ["main"]
