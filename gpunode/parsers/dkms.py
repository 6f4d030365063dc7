"""Parse `dkms status` lines (dkms 2.x "name, version, ..." and 3.x "name/version, ..." forms)."""

from __future__ import annotations

import re
from typing import NamedTuple

from gpunode.facts.packages import parse_dkms

_NVIDIA_MODULES = re.compile(r"^nvidia(?:-current|-tesla)?(?:-open|-srv)?(?:-\d+)?$")  # Debian: nvidia-current


class DkmsEntry(NamedTuple):
    """One `dkms status` line."""

    name: str
    version: str
    kernel: str | None
    state: str
    line: str

    @property
    def is_nvidia_driver(self) -> bool:
        """The GPU driver module itself (not nvidia-fs, nvidia-peermem, ...)."""
        return _NVIDIA_MODULES.match(self.name) is not None


def parse_dkms_status(lines: list[str] | str) -> list[DkmsEntry]:
    """Entries of `dkms status` output; unrecognised lines (warnings) are skipped."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [DkmsEntry(e.module, e.version, e.kernel, (e.status.split() or [""])[0], e.line)
            for e in parse_dkms("\n".join(lines))]  # the one `dkms status` parser (gpunode.facts.packages)
