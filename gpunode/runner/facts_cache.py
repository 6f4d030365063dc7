"""The facts a host reported last time, kept on the controller so that the next run can send its probe together with
the lock + facts script (one round trip when nothing changed).

Only a guess: the probe built from these facts is used only when the probe built from the fresh facts is the same
(`HostRun._probe`), so a stale, missing or unreadable cache costs one round trip, never a wrong answer. Files live in
`$XDG_CACHE_HOME/gpunode/facts/` (default `~/.cache/...`, never a home folder that does not exist), one per host
identity (name, address, port, user, become), written atomically; failing to read or write them is silent.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from gpunode.inventory import Host


def cache_dir() -> Path | None:
    """`$XDG_CACHE_HOME/gpunode/facts` (an absolute XDG_CACHE_HOME only, as the XDG spec says), else
    `~/.cache/...` when the home folder exists (a system user's /nonexistent home is never created); else None."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "gpunode" / "facts"
    home = Path(os.path.expanduser("~"))
    return home / ".cache" / "gpunode" / "facts" if home.is_absolute() and home.is_dir() else None


MAX_BYTES = 1 << 20  # facts are a few KB: anything bigger is not ours


def _path(host: Host) -> Path | None:
    folder = cache_dir()
    identity = "\0".join(map(str, (host.name, host.address, host.port, host.user, host.become, host.local)))
    return folder / f"{hashlib.sha256(identity.encode()).hexdigest()[:24]}.facts" if folder else None


def load(host: Host) -> str | None:
    """The raw facts output of the host's last run, or None."""
    path = _path(host)
    try:
        if path is None or path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def save(host: Host, facts_text: str) -> None:
    """Keep this run's raw facts output for the next run (best effort; a failed write leaves nothing behind)."""
    path = _path(host)
    if path is None:
        return
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".facts-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(facts_text)
        os.replace(tmp, path)
    except OSError:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

