"""The controller's package folder: one file per sha256 (`<root>/<aa>/<sha256>/<file name>`), written to a temporary
name and renamed in, so a reader sees a whole file or none. A plain folder the user can inspect and delete."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from gpunode.modcache.store import cache_home, sha256_file


def default_root() -> Path:
    """$XDG_CACHE_HOME/gpunode/packages (~/.cache/gpunode/packages)."""
    return cache_home() / "packages"


class PackageStore:
    """Package files by sha256 under `root`."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()

    def problem(self) -> str:
        """Why the folder cannot hold files (created when missing); "" when it can."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"the folder {self.root} cannot be created ({exc.strerror or exc})"
        if not os.access(self.root, os.W_OK | os.X_OK):
            return f"the folder {self.root} is not writable by this user"
        return ""

    def path(self, sha256: str, filename: str) -> Path:
        return self.root / sha256[:2] / sha256 / filename

    def lookup(self, sha256: str, filename: str, size: int) -> Path | None:
        """The stored file, when one of that size is there (its sha256 is checked when it was stored, and again by
        the host before apt sees it)."""
        path = self.path(sha256, filename)
        try:
            return path if path.stat().st_size == size else None
        except OSError:
            return None

    def put(self, sha256: str, filename: str, data: bytes) -> Path:
        """Store `data` as the file of `sha256`; ValueError when its digest is another."""
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise ValueError(f"{filename}: sha256 {actual[:16]}... is not the index's {sha256[:16]}...")
        target = self.path(sha256, filename)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=".new-", dir=target.parent)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(staging, 0o644)
        os.replace(staging, target)
        return target

    def verified(self, sha256: str, filename: str, size: int) -> Path | None:
        """The stored file only when its content still hashes to `sha256` (a damaged file is removed)."""
        path = self.lookup(sha256, filename, size)
        if path is None:
            return None
        if sha256_file(path) == sha256:
            return path
        path.unlink(missing_ok=True)
        return None
