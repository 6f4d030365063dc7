"""Errors that name the host, the step, the cause and the fix."""

from __future__ import annotations


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
