"""The facts a host reported last time, kept on the controller so that the next run can send its probe together with
the lock + facts script (one round trip when nothing changed).

Only a guess: the probe built from these facts is used only when the probe built from the fresh facts is the same
(`HostRun._probe`), so a stale, missing or unreadable cache costs one round trip, never a wrong answer. Files live in
`$XDG_CACHE_HOME/gpunode/facts/` (default `~/.cache/...`), one per host identity (name, address, port, user, become),
written atomically; failing to read or write them is silent.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from gpunode.inventory import Host


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpunode" / "facts"


def _path(host: Host) -> Path:
    identity = "\0".join(map(str, (host.name, host.address, host.port, host.user, host.become, host.local)))
    return cache_dir() / f"{hashlib.sha256(identity.encode()).hexdigest()[:24]}.facts"


def load(host: Host) -> str | None:
    """The raw facts output of the host's last run, or None."""
    try:
        return _path(host).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def save(host: Host, facts_text: str) -> None:
    """Keep this run's raw facts output for the next run (best effort)."""
    path = _path(host)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".facts-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(facts_text)
        os.replace(tmp, path)
