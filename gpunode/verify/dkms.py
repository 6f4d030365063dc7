"""Parse `dkms status` lines (dkms 2.x "name, version, ..." and 3.x "name/version, ..." forms)."""

from __future__ import annotations

import re
from typing import NamedTuple

_NEW = re.compile(r"^(?P<name>[^/,:\s]+)/(?P<version>[^,:\s]+)(?:,\s*(?P<kernel>[^,:\s]+))?"
                  r"(?:,\s*(?P<arch>[^,:\s]+))?:\s*(?P<state>[\w-]+)(?P<note>.*)$")
_OLD = re.compile(r"^(?P<name>[^/,:\s]+),\s*(?P<version>[^,:\s]+)(?:,\s*(?P<kernel>[^,:\s]+))?"
                  r"(?:,\s*(?P<arch>[^,:\s]+))?:\s*(?P<state>[\w-]+)(?P<note>.*)$")
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
    entries: list[DkmsEntry] = []
    for raw in lines:
        line = raw.strip()
        match = _NEW.match(line) or _OLD.match(line)
        if match:
            entries.append(DkmsEntry(match.group("name"), match.group("version"), match.group("kernel"),
                                     match.group("state"), line))
    return entries
