"""Parse errors that explain themselves to users (no traceback)."""

from __future__ import annotations

from gpunode.errors import GpunodeError


class SmiParseError(GpunodeError):
    """nvidia-smi output (or another capture) could not be understood."""

    def __init__(self, cause: str, *, fix: str = "", source: str = "") -> None:
        super().__init__(f"{source}: {cause}" if source else cause, fix=fix)
        self.source = source
