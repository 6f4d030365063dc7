"""The `gpunode` console script."""

from gpunode.tasks import main

__all__ = ["main"]
