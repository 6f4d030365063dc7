"""Which host of a run fetches each package file: the first host to need a file claims it and downloads it; the
others wait for it (and fetch it themselves if that host could not)."""

from __future__ import annotations

import threading
import time

_lock = threading.Condition()
_owners: dict[tuple[str, str], str] = {}
_done: dict[tuple[str, str], bool] = {}


def claim(root: str, sha256: str, host: str) -> str:
    """The host that fetches this file in this run: `host` when it is the first to ask."""
    with _lock:
        return _owners.setdefault((root, sha256), host)


def finish(root: str, sha256: str, stored: bool) -> None:
    """The owner is done with the file: stored in the folder, or not (its waiters fetch it themselves)."""
    with _lock:
        _done[(root, sha256)] = stored
        _lock.notify_all()


def wait(root: str, sha256: str, timeout: float, cancel: threading.Event | None = None) -> bool:
    """Wait for the owner of a file; True when it stored the file, False when it failed or the wait ran out."""
    deadline = time.monotonic() + timeout
    with _lock:
        while (root, sha256) not in _done:
            left = deadline - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            _lock.wait(min(left, 1.0))
        return _done[(root, sha256)]
