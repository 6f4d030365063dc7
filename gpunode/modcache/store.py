"""The cache folder: one folder per group holding the binary package and `manifest.json` (key, vermagic, sha256).

A plain folder the user can read, copy and prune; on the controller by default ($XDG_CACHE_HOME/gpunode/modules), or
a folder the user names (a share the fleet mounts). Entries are written to a temporary folder and renamed into place,
so a reader sees a whole entry or none. Trust: the package is gpunode's own, made from a DKMS build on a host of this
run or an earlier one; the manifest's sha256, taken by the controller when the package arrived, is checked before the
package is sent to a host, and the host checks it again after the transfer."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpunode.modcache.key import CacheKey

MANIFEST = "manifest.json"


def cache_home() -> Path:
    """$XDG_CACHE_HOME/gpunode (~/.cache/gpunode): where the controller keeps built modules and package files."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpunode"


def default_root() -> Path:
    """$XDG_CACHE_HOME/gpunode/modules (~/.cache/gpunode/modules)."""
    return cache_home() / "modules"


@dataclass
class Entry:
    """One cached build."""

    key: CacheKey
    folder: Path
    file: str
    sha256: str
    vermagic: str
    built_on: str = ""
    created: str = ""
    size: int = 0

    @property
    def package(self) -> Path:
        return self.folder / self.file

    def problem(self) -> str:
        """Why this entry must not be installed ("" when it may): a package whose checksum is not the manifest's,
        or a vermagic that is not the key's kernel."""
        if not self.vermagic.startswith(f"{self.key.kernel} "):
            return f"its vermagic {self.vermagic!r} is not kernel {self.key.kernel}'s"
        try:
            actual = sha256_file(self.package)
        except OSError as exc:
            return f"its package cannot be read ({exc.strerror})"
        if actual != self.sha256:
            return f"its package's sha256 {actual[:16]}... is not the manifest's {self.sha256[:16]}..."
        return ""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Store:
    """The cache under `root`."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()

    def folder(self, key: CacheKey) -> Path:
        return self.root / key.path

    def lookup(self, key: CacheKey) -> Entry | None:
        """The entry of this group, None when there is none (or its manifest is unreadable: it counts as absent and
        is replaced by the next build)."""
        return _read_entry(self.folder(key))

    def put(self, key: CacheKey, filename: str, data: bytes, vermagic: str, built_on: str) -> Entry:
        """Store a package for the group (replacing an older entry), manifest written last, folder renamed in."""
        target = self.folder(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=target.parent))
        (staging / filename).write_bytes(data)
        manifest = {"key": key.as_dict(), "file": filename, "sha256": hashlib.sha256(data).hexdigest(),
                    "vermagic": vermagic, "built_on": built_on, "size": len(data),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        os.chmod(staging, 0o755)
        self.remove(key)
        os.rename(staging, target)
        entry = _read_entry(target)
        assert entry is not None
        return entry

    def remove(self, key: CacheKey) -> None:
        """Drop a group's entry (moved aside first, so no reader sees half of it)."""
        self.remove_folder(self.folder(key))

    def remove_folder(self, target: Path) -> None:
        """Drop an entry's folder, moved aside first."""
        if target.exists():
            trash = Path(tempfile.mkdtemp(prefix=".old-", dir=target.parent))
            os.rename(target, trash / "entry")
            shutil.rmtree(trash, ignore_errors=True)

    def unreadable(self) -> list[Path]:
        """Entry folders whose manifest cannot be read (hand-edited, cut short): never used, shown and pruned."""
        if not self.root.is_dir():
            return []
        return sorted(m.parent for m in self.root.glob(f"*/*/*/{MANIFEST}") if _read_entry(m.parent) is None)

    def entries(self) -> list[Entry]:
        """Every entry, sorted by kernel, module and version."""
        found = [_read_entry(m.parent) for m in self.root.glob(f"*/*/*/{MANIFEST}")] if self.root.is_dir() else []
        return sorted((e for e in found if e), key=lambda e: (e.key.kernel, e.key.module, e.key.version))

    @contextlib.contextmanager
    def group_lock(self, key: CacheKey, timeout: float, cancel: threading.Event | None = None,
                   purpose: str = "build") -> Iterator[None]:
        """Hold the group's lock: the first host of a group builds while the others (threads of this run, or other
        gpunode processes on this controller or sharing the folder) wait here, then find its entry. Another
        `purpose` (a URL cache's "fetch") is a lock of its own. A folder this controller may only read (a share
        mounted read-only, to hand out built modules) keeps its locks in the controller's cache home instead."""
        name = hashlib.sha256(key.path.encode()).hexdigest()[:32]
        name = name if purpose == "build" else f"{name}.{purpose}"
        with self._lock_file(name) as handle:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline or (cancel is not None and cancel.is_set()):
                        raise TimeoutError(f"waited {timeout:.0f} s for the {purpose} of {key.label}") from None
                    time.sleep(0.3)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _lock_file(self, name: str) -> typing.IO[str]:
        """The lock file `name`, opened: in the cache folder's `.locks`, or, where this controller may not write the
        folder, in <cache home>/locks/<hash of the folder>."""
        try:
            locks = self.root / ".locks"
            locks.mkdir(parents=True, exist_ok=True)
            return (locks / f"{name}.lock").open("a")
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM) or not self.root.is_dir():
                raise
        locks = cache_home() / "locks" / hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:16]
        locks.mkdir(parents=True, exist_ok=True)
        return (locks / f"{name}.lock").open("a")


def _read_entry(folder: Path) -> Entry | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
        return Entry(CacheKey.from_dict(data["key"]), folder, str(data["file"]), str(data["sha256"]),
                     str(data["vermagic"]), str(data.get("built_on", "")), str(data.get("created", "")),
                     int(data.get("size", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
