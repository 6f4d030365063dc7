"""The package share (`package_cache`): the files an apt install fetches are downloaded by one host of the run and
handed to the others through the controller, so N hosts of one distro release pull them from the mirror once.

Before an install (an action with `installs`), one command asks the host what apt would fetch and each file's sha256
from its package index. Files already in the controller's folder are sent to the host; a file nobody has yet is
claimed by the first host that needs it, which downloads it with apt and sends it back; the others wait for it. A
host checks every file it receives against its own index before placing it in apt's archive cache; the install then
runs as always (apt installs what it finds there, fetches the rest). Anything that goes wrong here only means apt
downloads the file itself: the share never fails a step. apt hosts only; on dnf/yum hosts the install is unchanged."""

from __future__ import annotations

import base64
import functools
import io
import tarfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gpunode.parsers.apt_downloads import Download, parse_apt_downloads
from gpunode.pkgshare import coord
from gpunode.pkgshare.remote import BEGIN, download_command, plan_command, read_command, seed_command
from gpunode.pkgshare.store import PackageStore
from gpunode.steps.base import Action, StepContext
from gpunode.steps.pkgmgr import APT_ENV, AptManager, without_refresh
from gpunode.values import cache_folder

BATCH_BYTES = 64 << 20  # at most this much package data in one transfer (memory on the controller, per host)


def share_for(value: object) -> Callable[[StepContext, Action], str] | None:
    """The share a `package_cache` value names: off/false/none/unset no share, true or "" the controller's default
    folder ($XDG_CACHE_HOME/gpunode/packages), else that folder on the controller."""
    folder = cache_folder(value)
    if folder is None:
        return None
    store = PackageStore(folder or None)
    return functools.partial(prefetch, store=store)


def prefetch(ctx: StepContext, action: Action, store: PackageStore) -> str:
    """Put the install's files in the host's archive cache where the run has them; the command to run then: the
    action's own, less its list refresh when that comes first (the plan command has just done it); a refresh after
    other commands (one that adds a repository) stays."""
    command = action.command or ""
    if ctx.facts.os.package_manager != "apt":
        return command
    problem = store.problem()
    if problem:
        ctx.notes.append(f"package share off for this host: {problem}; apt downloads every file itself (fix: set "
                         "package_cache to a folder on the controller that this user can write, or to off)")
        return command
    refreshes = ctx.lists_stale and (action.refreshes or f"{AptManager.update()} && " in command)
    update = f"{APT_ENV} {AptManager.update()}" if refreshes else ""
    plan = ctx.run(plan_command(update, AptManager().print_uris(list(action.installs), action.recommends)),
                   timeout=action.timeout, label="package share: the files this install fetches")
    if not plan.ok:
        ctx.notes.append(f"package share skipped (exit {plan.exit_code}): {plan.tail(2)}")
        return command
    files = [f for f in parse_apt_downloads(plan.stdout) if f.shareable]
    if files:
        ctx.notes.append(_share(ctx, files, store, action.timeout or 3600))
    return without_refresh(command) if update else command  # the lists were just refreshed


def _share(ctx: StepContext, files: list[Download], store: PackageStore, timeout: float) -> str:
    """Fetch what this host owns, wait for the rest, send the host what the folder has; a one-line account."""
    root, host = str(store.root), ctx.host.name
    mine: list[Download] = []
    theirs: list[Download] = []
    for f in files:
        if store.lookup(f.sha256, f.filename, f.size) is None:
            (mine if coord.claim(root, f.sha256, host) == host else theirs).append(f)
    fetched = _fetch(ctx, mine, store) if mine else []
    for f in theirs:
        coord.wait(root, f.sha256, timeout)
    wanted = [f for f in files if f not in fetched]
    sent = _send(ctx, wanted, store)
    return (f"package share: {len(sent)} of {len(files)} files ({_size(sum(f.size for f in sent))}) from the "
            "controller's folder, "
            f"{len(fetched)} downloaded here and shared, {len(files) - len(sent) - len(fetched)} left to apt")


def _fetch(ctx: StepContext, files: list[Download], store: PackageStore) -> list[Download]:
    """This host downloads the files it claimed and the controller keeps them; each claim is settled either way."""
    stored: list[Download] = []
    root = str(store.root)
    try:
        got = ctx.run(download_command(files), timeout=3600, label=f"package share: download {len(files)} files")
        if got.ok:
            for batch in _batches(files):
                stored += _read_back(ctx, batch, store)
        else:
            ctx.notes.append(f"package share: the download failed (exit {got.exit_code}): {got.tail(2)}")
    finally:
        for f in files:
            coord.finish(root, f.sha256, f in stored)
    return stored


def _read_back(ctx: StepContext, batch: Sequence[Download], store: PackageStore) -> list[Download]:
    """One batch of downloaded files from the host into the controller's folder (each checked by its sha256)."""
    sensitive, ctx.conn.sensitive = ctx.conn.sensitive, True  # the base64 stays out of the host log
    try:
        result = ctx.run(read_command(batch), timeout=1800, label=f"package share: send {len(batch)} files back")
    finally:
        ctx.conn.sensitive = sensitive
    _, sep, body = result.stdout.partition(BEGIN)
    if not result.ok or not sep:
        return []
    members = _untar(base64.b64decode(body.strip()))
    stored = []
    for f in batch:
        data = members.get(f.filename)
        try:
            if data is not None:
                store.put(f.sha256, f.filename, data)
                stored.append(f)
        except (ValueError, OSError) as exc:
            ctx.notes.append(f"package share: {f.filename} not kept: {exc}")
    return stored


def _send(ctx: StepContext, files: list[Download], store: PackageStore) -> list[Download]:
    """The files the controller's folder holds, sent to the host's archive cache in batches; those that went in."""
    ready, damaged = [], []
    for f in files:
        present = store.lookup(f.sha256, f.filename, f.size) is not None
        if store.verified(f.sha256, f.filename, f.size) is not None:
            ready.append(f)
        elif present:
            damaged.append(f.filename)
    if damaged:
        ctx.notes.append(f"package share: removed from {store.root} (their sha256 is not the index's; apt fetches "
                         f"them): {', '.join(damaged)}")
    sent: list[Download] = []
    for batch in _batches(ready):
        data = _tar((f.filename, store.path(f.sha256, f.filename)) for f in batch)
        result = ctx.run(seed_command(batch), stdin=data, timeout=1800,
                         label=f"package share: {len(batch)} files into apt's archive cache")
        if result.ok:
            sent += batch
        else:
            ctx.notes.append(f"package share: the host refused a batch (exit {result.exit_code}): {result.tail(2)}")
    return sent


def _size(count: int) -> str:
    """Bytes as MiB, or KiB below one MiB (a few small packages are not "0 MiB")."""
    return f"{count >> 20} MiB" if count >= 1 << 20 else f"{count >> 10} KiB"


def _batches(files: Sequence[Download]) -> Iterator[list[Download]]:
    batch: list[Download] = []
    for f in files:
        if batch and sum(b.size for b in batch) + f.size > BATCH_BYTES:
            yield batch
            batch = []
        batch.append(f)
    if batch:
        yield batch


def _tar(members: Iterator[tuple[str, Path]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, path in members:
            tar.add(str(path), arcname=name, recursive=False)
    return out.getvalue()


def _untar(data: bytes) -> dict[str, bytes]:
    """The regular files of a tar, by name; a damaged tar gives what could be read."""
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            for member in tar:
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is not None:
                    found[member.name] = handle.read()
    except (tarfile.TarError, EOFError):
        pass
    return found
