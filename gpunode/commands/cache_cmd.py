"""`gpunode cache list|prune`: the module cache folder, read and pruned."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from gpunode.errors import GpunodeError, UsageError
from gpunode.modcache.store import Entry, Store, cache_home
from gpunode.modcache.url_source import mirror_folder, source_of, url_problem


def cache_command(action: str, directory: str | None, kernel: str | None, older_than: float | None,
                  invalid: bool, as_json: bool) -> str:
    """List or prune the entries; prune removes those matching every filter given (and needs one). An unknown
    action, a prune without a filter or a --dir that is not a folder is bad input (UsageError: exit 2), found before
    the folder is read."""
    if action not in ("list", "prune"):
        raise UsageError(f"unknown cache action {action!r}", fix="use `gpunode cache list` or `gpunode cache prune`")
    if action == "prune" and not (kernel or older_than is not None or invalid):
        raise UsageError("prune needs a filter: --kernel K, --older-than DAYS or --invalid",
                         fix="say which entries to remove (`--older-than 0` removes all)")
    if directory and "://" in directory:  # a URL cache: its mirror on this controller
        if problem := url_problem(directory):
            raise UsageError(problem, fix="name the https URL given as module_cache, or a folder")
        directory = str(mirror_folder(directory, cache_home()))
        if not Path(directory).is_dir():
            return f"nothing read from that URL on this controller yet (its mirror would be {directory})\n"
    if directory and not Path(directory).expanduser().is_dir():
        raise UsageError(f"--dir {directory}: no such folder",
                         fix="name the folder the cache was written to (module_cache in the playbook, or "
                         "user-data --module-cache); without --dir: $XDG_CACHE_HOME/gpunode/modules")
    try:
        return _cache_command(action, directory, kernel, older_than, invalid, as_json)
    except (OSError, ValueError) as exc:
        raise GpunodeError(f"the module cache {directory or 'folder'} cannot be read: {exc}",
                           fix="name an existing folder you may read with --dir (default "
                           "$XDG_CACHE_HOME/gpunode/modules)") from None


def _cache_command(action: str, directory: str | None, kernel: str | None, older_than: float | None,
                   invalid: bool, as_json: bool) -> str:
    store = Store(directory or None)
    entries = [e for e in store.entries() if not kernel or e.key.kernel == kernel]
    broken = [f for f in store.unreadable() if not kernel or f.relative_to(store.root).parts[0] == kernel]
    if action == "list":
        return _listing(store, entries, broken, as_json)
    return _prune(store, entries, broken if invalid else [], older_than, invalid)


def _prune(store: Store, entries: list[Entry], broken: list[Path], older_than: float | None, invalid: bool) -> str:
    """Remove the entries older than `older_than` days and/or refused (`invalid`), and the unreadable folders."""
    cutoff = time.time() - (older_than or 0) * 86400
    doomed = [e for e in entries if (older_than is None or _created(e) <= cutoff) and (not invalid or e.problem())]
    for entry in doomed:
        store.remove(entry.key)
    for folder in broken:
        store.remove_folder(folder)
    where = f" (this controller's copy of {url}; the URL is unchanged)" if (url := source_of(store.root)) else ""
    lines = [f"removed {e.key.label}{where}" for e in doomed] + [f"removed {f} (unreadable manifest)" for f in broken]
    return "\n".join(lines or ["nothing to remove"]) + "\n"


def _created(entry: Entry) -> float:
    try:
        return datetime.strptime(entry.created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _listing(store: Store, entries: list[Entry], broken: list[Path], as_json: bool) -> str:
    rows = [{**e.key.as_dict(), "folder": str(e.folder), "file": e.file, "sha256": e.sha256, "vermagic": e.vermagic,
             "built_on": e.built_on, "created": e.created, "size": e.size, "problem": e.problem()} for e in entries]
    unreadable = [{"folder": str(f), "problem": "its manifest.json cannot be read"} for f in broken]
    if as_json:
        return json.dumps({"root": str(store.root), "entries": rows, "unreadable": unreadable}, indent=2) + "\n"
    if not rows and not unreadable:
        return f"no entries in {store.root}\n"
    lines = [f"module cache {store.root}:"]
    for row, entry in zip(rows, entries, strict=True):
        state = f"REFUSED: {row['problem']}" if row["problem"] else "ok"
        lines.append(f"  {entry.key.label}  {row['size'] // 1024} KiB  built on {row['built_on'] or '?'} "
                     f"{row['created']}  {state}")
    lines += [f"  {row['folder']}  REFUSED: {row['problem']} (never used; `cache prune --invalid` removes it)"
              for row in unreadable]
    return "\n".join(lines) + "\n"
