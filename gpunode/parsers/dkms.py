"""`dkms status` lines (dkms 2.x "name, version, kernel, arch: status" and 3.x "name/version, kernel, arch:
status"): the one parser that plans (facts, steps) and diagnosis (verify) share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NVIDIA_MODULE_PATTERN = r"^nvidia(?:-current|-tesla)?(?:-open|-srv)?(?:-\d+)?$"  # Debian: nvidia-current
_NVIDIA_MODULES = re.compile(NVIDIA_MODULE_PATTERN)

# What dkms adds after "installed" when the module files in the kernel tree are not the ones it built (it compares
# them with `diff -q`): dell/dkms dkms.in module_status_built_extra, 793fdab5 lines 2257 and 2263; up to dkms 3.1.2
# (Debian 12's 3.0.10: dkms.in line 1727 at 3f72c9b0; v2.8.4: `dkms` line 2093 at 5375478c) the third wording.
# A copy cut short by a full disk reads so; "(Original modules exist)" is benign.
DIVERGED_WORDS = ("Built modules are missing in the kernel modules folder",
                  "Differences between built and installed modules",
                  "WARNING! Diff between built and installed module!")


@dataclass(frozen=True)
class DkmsEntry:
    """One line of `dkms status`."""

    module: str
    version: str
    kernel: str | None = None
    arch: str | None = None
    status: str = ""
    line: str = field(default="", compare=False)   # the line as dkms printed it (for evidence)

    @property
    def name(self) -> str:
        """The module's name (as diagnosis calls it)."""
        return self.module

    @property
    def state(self) -> str:
        """The status's first word: installed, built, added (a 2.x "installed (WARNING! ...)" is installed)."""
        return (self.status.split() or [""])[0]

    @property
    def diverged(self) -> bool:
        """Installed, but dkms says the module files in the kernel tree differ from (or lack) the ones it built."""
        return self.state.startswith("installed") and any(words in self.status for words in DIVERGED_WORDS)

    @property
    def is_nvidia_driver(self) -> bool:
        """The GPU driver module itself (not nvidia-fs, nvidia-peermem, ...)."""
        return _NVIDIA_MODULES.match(self.module) is not None


def _entry(line: str) -> DkmsEntry | None:
    head, sep, status = line.partition(": ")
    if not sep:
        return None
    parts = [p.strip() for p in head.split(",")]
    if "/" in parts[0]:
        module, _, version = parts[0].partition("/")
        rest = parts[1:]
    elif len(parts) >= 2:
        module, version, rest = parts[0], parts[1], parts[2:]
    else:
        return None
    if not module or not version or " " in module:
        return None
    return DkmsEntry(module=module, version=version, kernel=rest[0] if rest else None,
                     arch=rest[1] if len(rest) > 1 else None, status=status.strip(), line=line.strip())


def parse_dkms(text: str | None) -> tuple[DkmsEntry, ...]:
    """Entries of `dkms status`; unrecognised lines (errors, warnings) are skipped."""
    return tuple(entry for line in (text or "").splitlines() if (entry := _entry(line)) is not None)


def parse_dkms_status(lines: list[str] | str) -> list[DkmsEntry]:
    """`parse_dkms` of lines already split (as verify's evidence holds them) or of text."""
    return list(parse_dkms(lines if isinstance(lines, str) else "\n".join(lines)))


def dkms_installed(entries: tuple[DkmsEntry, ...], modules: tuple[str, ...], kernel: str) -> bool:
    """True when one of `modules` is DKMS-installed for `kernel` (dkms 2.x "installed" and 3.x forms) with the files
    DKMS built (an install whose files differ, e.g. cut short by a full disk, is not installed)."""
    return any(e.module in modules and e.kernel == kernel and e.status.startswith("installed") and not e.diverged
               for e in entries)


def diverged_entries(entries: tuple[DkmsEntry, ...], modules: tuple[str, ...], kernel: str) -> list[DkmsEntry]:
    """The entries of `modules` for `kernel` that dkms says are installed with other files than it built."""
    return [e for e in entries if e.module in modules and e.kernel == kernel and e.diverged]
