"""Errors that name the host, the step, the cause and the fix."""

from __future__ import annotations

import re


class GpunodeError(Exception):
    """A failure on one host: what happened and what to do about it."""

    def __init__(self, cause: str, *, fix: str = "", host: str = "", step: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.fix = fix
        self.host = host
        self.step = step

    def __str__(self) -> str:
        where = " ".join(p for p in (f"[{self.host}]" if self.host else "", self.step and f"{self.step}:") if p)
        text = f"{where} {self.cause}".strip()
        return f"{text}\n  fix: {self.fix}" if self.fix else text


class UsageError(GpunodeError):
    """Bad input (inventory, playbook, options): nothing ran. Exit code 2."""

    def __init__(self, cause: str, *, fix: str = "", source: str = "", line: int | None = None) -> None:
        location = f"{source}:{line}" if source and line else source
        super().__init__(f"{location}: {cause}" if location else cause, fix=fix)
        self.source = source
        self.line = line


class ConnectError(GpunodeError):
    """The host could not be reached or authenticated."""


class HostKeyError(ConnectError):
    """The host key is unknown or has changed."""


# What programs print when a write finds the disk full: strerror(ENOSPC) and strerror(EDQUOT) as glibc words them
# (cp, cat, tar, dd, dpkg: "failed to write (No space left on device)"), and apt's and dnf's own checks before
# downloading ("You don't have enough free space in /var/cache/apt/archives/.", "not enough free space").
DISK_FULL = ("No space left on device", "You don't have enough free space", "not enough free space",
             "Disk quota exceeded")
_QUOTED_PATH = re.compile(r"['‘`](/[^'’`]+)['’`]")
_PATH_AFTER_IN = re.compile(r"\bin (/\S+?)\.?$")


def disk_full_fix(output: str, writing: str = "") -> str:
    """A fix for output that says the disk is full, naming the path it names or the file being written (`df -h` of
    its folder); "" otherwise."""
    lines = [line for line in output.splitlines() if any(marker in line for marker in DISK_FULL)]
    if not lines:
        return ""
    # the path in the line that says so (cp, dd, dpkg, apt), else one the command printed beside it
    found = _QUOTED_PATH.findall(lines[0]) or _PATH_AFTER_IN.findall(lines[0].strip()) or \
        ([writing] if writing.startswith("/") else []) or _QUOTED_PATH.findall(output)
    where = f"`df -h {found[-1].rsplit('/', 1)[0] or '/'}`" if found else "`df -h / /var /tmp`"
    return (f"the host is out of disk space ({lines[0].strip()[:200]}): see {where} on it, free space (`apt-get "
            "clean` or `dnf clean all`, old logs with `journalctl --vacuum-size=200M`) or grow the disk, then run "
            "again")
