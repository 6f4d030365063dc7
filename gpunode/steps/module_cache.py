"""A DKMS module for one kernel through the module cache: what to plan, and how to carry it out on a host.

Generic over the module (name and version come from the caller: a playbook, or the driver step from the installed
packages), so the NVIDIA driver and any other DKMS module take the same path. The step-facing half of the cache:
gpunode/modcache (key, store, remote commands, coordination) stays below the steps and never imports them."""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpunode.distros import for_os
from gpunode.modcache import coord
from gpunode.modcache.dkms_shell import DIVERGED_EXIT
from gpunode.modcache.key import CacheKey, key_for
from gpunode.modcache.remote import build_command, finish_command, install_command, pack_command, parse_pack
from gpunode.modcache.store import Entry, Store
from gpunode.modcache.url_source import SourceError, fetch, source_of
from gpunode.steps.cache_setting import cache_store
from gpunode.steps.fixes import failure_fix
from gpunode.steps.model import Action, StepContext, StepFailed

HOST_SIDE_REFUSAL = {4: "the module in its package is not for this kernel (vermagic)",
                     5: "the package arrived damaged (sha256)"}


@dataclass
class ModuleAction(Action):
    """Build or install one DKMS module for one kernel; `key` None means build locally, outside the cache."""

    key: CacheKey | None = None
    root: str = ""
    mode: str = "build"           # build (and publish), install, wait (another host builds, then install)
    form: str = "deb"             # the package form of the host's distro (gpunode/modcache/remote.py)


def _lookup(ctx: StepContext, store: Store, key: CacheKey, timeout: float) -> Entry | None:
    """The group's entry in the store; for a URL cache without it in the mirror yet, read from the URL (once per
    group at a time: the others wait for that download). A URL that cannot be read is noted, and the host builds."""
    entry = store.lookup(key)
    url = source_of(store.root)
    if entry is not None or not url:
        return entry
    with _locked(store, key, timeout, ctx, purpose="fetch"):
        if (entry := store.lookup(key)) is not None:
            return entry
        try:
            return fetch(url, key, store)
        except SourceError as exc:
            trust = (" (a private CA: point SSL_CERT_FILE at its certificate for the gpunode command)"
                     if "CERTIFICATE_VERIFY_FAILED" in str(exc) else "")
            ctx.notes.append(f"module cache: {url} could not be read for {key.label}, so it is built here: {exc}"
                             f"{trust}")
            return None


def plan_module(ctx: StepContext, module: str, version: str, kernel: str, *, cache: str | bool = "", flavour: str = "",
                signer: str = "", timeout: float = 3600) -> ModuleAction:
    """The action that leaves `module/version` installed for `kernel`: install from the cache, wait for this run's
    builder of the group, or build (and publish)."""
    store = cache_store(cache)
    what = f"{module}/{version} for kernel {kernel}"
    fix = f"headers for {kernel} must be installed; see /var/lib/dkms/{module}/{version}/build/make.log on the host"
    if store is None:
        return ModuleAction(f"build {what} with DKMS", "dkms status shows no build for it; module cache off",
                            build_command(_bare(module, version, kernel)), timeout=timeout, fix=fix)
    try:
        key, why = key_for(module, version, kernel, ctx.facts.os.arch or "x86_64", flavour, ctx.facts.secure_boot,
                           signer)
    except ValueError as exc:  # a name read on the host (a kernel release, a package's version) that is not plain
        raise StepFailed(f"{exc}: it cannot be part of a module cache entry",
                         fix="set module_cache: off for this host (it builds its own)") from None
    if key is None:
        return ModuleAction(f"build {what} with DKMS (not cached)", why, build_command(_bare(module, version, kernel)),
                            timeout=timeout, fix=fix)
    root, form = str(store.root), for_os(ctx.facts.os).module_cache_form
    entry = _lookup(ctx, store, key, timeout)
    if entry is not None and not entry.problem():
        return ModuleAction(f"install {what} from the module cache (built on {entry.built_on or 'another host'})",
                            f"cache entry {store.folder(key)}: no compiler run",
                            install_command(key, entry.sha256, form), timeout=timeout, fix=fix, key=key, root=root,
                            mode="install", form=form)
    builder = coord.claim(root, key.path, ctx.host.name)
    stale = f" (the cached entry is refused: {entry.problem()})" if entry is not None else ""
    if builder != ctx.host.name:
        return ModuleAction(f"wait for {builder}'s DKMS build of {what}, then install it from the module cache",
                            f"same group as {builder}{stale}", install_command(key, "SHA256", form),
                            timeout=timeout, fix=fix, key=key, root=root, mode="wait", form=form)
    url = source_of(store.root)
    keep = f"keep it in this controller's copy of {url}" if url else "add it to the module cache"
    return ModuleAction(f"build {what} with DKMS and {keep}", f"no cache entry for its group in {url or store.root}"
                        f"{stale}", build_command(key), timeout=timeout, fix=fix, key=key, root=root, mode="build",
                        form=form)


def _bare(module: str, version: str, kernel: str) -> CacheKey:
    return CacheKey(module, version, kernel, "any")


def _fail_if_group_failed(action: ModuleAction, key: CacheKey) -> None:
    """A host of a group whose build failed in this run fails at once with that build's cause and fix."""
    if (failed := coord.failure(action.root, key.path)) is not None:
        raise StepFailed(f"{failed[0]}'s DKMS build of {key.label} failed in this run: {failed[1]}",
                         fix=failed[2] or action.fix)


def apply_module(ctx: StepContext, action: ModuleAction) -> str:
    """Carry the action out; returns what happened: "built", "built+published" or "installed from the cache"."""
    if action.key is None:
        _build(ctx, action)
        return "built"
    store, key = Store(action.root), action.key
    _fail_if_group_failed(action, key)
    entry = _entry_or_build(ctx, action, store, key)
    if entry is None:
        return "built+published"
    if _send_entry(ctx, action, key, entry, "install", "installing"):
        return "installed from the cache"
    with _locked(store, key, action.timeout, ctx):
        current = store.lookup(key)
        if current is not None and current.sha256 == entry.sha256:
            store.remove(key)
        _build_and_publish(ctx, action, store, key)
    return "built+published"


def apply_around(ctx: StepContext, action: ModuleAction, install: Callable[[], bool]) -> str:
    """For packages whose own scriptlet builds the module as they go in (NVIDIA's kmod RPM's %post): under the
    group's lock, a valid cached build is placed first, so that the scriptlet's dkms finds it built and compiles
    nothing; then `install` runs (False: it brought another version than the key's, the placed tree is taken away)
    and the module is installed for the target kernel. Without an entry the scriptlet builds here, and the build is
    published. Returns what happened, as `apply_module`; "" when the installed version was not the key's."""
    if action.key is None:
        if not install():
            return ""
        _build(ctx, action)
        return "built"
    store, key = Store(action.root), action.key
    _fail_if_group_failed(action, key)
    take_away = (f"[ -L /var/lib/dkms/{key.module}/{key.version}/source ] || "
                 f"rm -rf /var/lib/dkms/{key.module}/{key.version}")
    with _locked(store, key, action.timeout, ctx):
        placed = _place(ctx, action, store, key)
        try:
            same = install()
        except StepFailed:
            if placed:  # no stray tree without its source for the next run's dkms status
                ctx.run(take_away, label="take the placed tree away")
            raise
        if not same:
            if placed:
                ctx.run(take_away, label="take the placed tree away")
            return ""
        if placed:
            _build(ctx, ModuleAction(f"install {key.label} from the tree in place", "", finish_command(key),
                                     timeout=action.timeout, fix=action.fix))
            return "installed from the cache"
        try:
            _build_and_publish(ctx, action, store, key)
        except StepFailed as exc:
            coord.record_failure(action.root, key.path, ctx.host.name, str(exc).splitlines()[0], exc.fix)
            raise
        return "built+published"


def _place(ctx: StepContext, action: ModuleAction, store: Store, key: CacheKey) -> bool:
    """Under the group's lock: the valid entry's tree put in place on the host (True), or none (an entry refused by
    the controller or the host is removed: this host's scriptlet builds it, and it is published again)."""
    entry = store.lookup(key)
    problem = entry.problem() if entry is not None else ""
    if entry is None or problem:
        if problem:
            _drop_refused(ctx, store, key, problem)
        return False
    if _send_entry(ctx, action, key, entry, "place", "placing"):
        return True
    store.remove(key)
    return False


def _send_entry(ctx: StepContext, action: ModuleAction, key: CacheKey, entry: Entry, verb: str, doing: str) -> bool:
    """The entry's package sent to the host and installed (or placed); False when the host refused it (a vermagic
    not its kernel's, damaged in transit: noted, the caller rebuilds), any other failure raised."""
    result = ctx.run(install_command(key, entry.sha256, action.form), stdin=entry.package.read_bytes(),
                     timeout=action.timeout, label=f"{verb} {key.label} from the module cache")
    if result.ok:
        return True
    if result.exit_code == DIVERGED_EXIT:
        raise StepFailed(f"{doing} {key.label} from the module cache failed: the module files in the kernel tree are "
                         f"not whole (exit {result.exit_code}):\n{result.tail()}",
                         fix=f"free space where the kernel's modules go (/lib/modules/{key.kernel}, as said above), "
                         "then run again: the cut-short install is undone and done again from the cache")
    if result.exit_code not in HOST_SIDE_REFUSAL:
        raise StepFailed(f"{doing} {key.label} from the module cache failed (exit {result.exit_code}):\n"
                         f"{result.tail()}", fix=failure_fix(result.stdout + result.stderr) or
                         f"{action.fix}; the entry is {entry.folder}")
    ctx.notes.append(f"module cache: refused the cached {key.label}: {HOST_SIDE_REFUSAL[result.exit_code]}; "
                     "rebuilt it here")
    return False


def _drop_refused(ctx: StepContext, store: Store, key: CacheKey, problem: str) -> None:
    """An entry the controller refuses (checksum, vermagic) is removed; the note says why (the host rebuilds it)."""
    ctx.notes.append(f"module cache: refused the cached {key.label} ({store.folder(key)}): {problem}; rebuilt it")
    store.remove(key)


def _entry_or_build(ctx: StepContext, action: ModuleAction, store: Store, key: CacheKey) -> Entry | None:
    """Under the group's lock: the valid entry (None after building and publishing one here)."""
    with _locked(store, key, action.timeout, ctx):
        entry = store.lookup(key)
        problem = entry.problem() if entry is not None else ""
        if entry is not None and not problem:
            return entry
        _fail_if_group_failed(action, key)  # the builder we waited for failed
        if problem:
            _drop_refused(ctx, store, key, problem)
        try:
            _build_and_publish(ctx, action, store, key)
        except StepFailed as exc:
            coord.record_failure(action.root, key.path, ctx.host.name, str(exc).splitlines()[0], exc.fix)
            raise
        return None


@contextlib.contextmanager
def _locked(store: Store, key: CacheKey, timeout: float, ctx: StepContext, purpose: str = "build") -> Iterator[None]:
    """The group's lock for a build (or a download), with errors said as a step's (a wait too long, a folder that
    cannot be written)."""
    try:
        lock = store.group_lock(key, timeout=timeout or 3600, purpose=purpose)
        lock.__enter__()
    except TimeoutError as exc:
        raise StepFailed(f"{exc}: the host building it is still at it or hung",
                         fix="see the other host's log; raise the step's timeout, or run again") from None
    except OSError as exc:
        raise StepFailed(f"the module cache {store.root} cannot be used: {exc}",
                         fix="make the folder writable, name another with module_cache: PATH, or module_cache: off"
                         ) from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


_NO_SOURCE = re.compile(r"Directory: (/\S+?)\.? does not exist")
_NO_HEADERS = re.compile(r"kernel headers for kernel (\S+) cannot be found")


def build_fix(default: str, output: str) -> str:
    """The fix for a failed DKMS build, from dkms's own message where it says what is missing (the module's source,
    the kernel's headers); else `default` (headers and make.log)."""
    if source := _NO_SOURCE.search(output):
        return (f"put the module's source with its dkms.conf in {source.group(1)} (a step before this one: file, "
                "command, or a package that ships it), or correct the step's name and version")
    if headers := _NO_HEADERS.search(output):
        return (f"install the headers of kernel {headers.group(1)} (linux-headers-{headers.group(1)} on Debian/Ubuntu, "
                "kernel-devel on EL; the kernel_headers step), or name the kernel the headers are for in `kernel`")
    return default


def _build(ctx: StepContext, action: ModuleAction) -> None:
    assert action.command is not None
    result = ctx.run(action.command, timeout=action.timeout, label=action.summary)
    if not result.ok:
        raise StepFailed(f"{action.summary} failed (exit {result.exit_code}):\n{result.tail()}",
                         fix=build_fix(action.fix, result.tail()))


def _build_and_publish(ctx: StepContext, action: ModuleAction, store: Store, key: CacheKey) -> None:
    """DKMS build on this host, then its tree packed and stored in the cache with its vermagic and sha256."""
    result = ctx.run(build_command(key), timeout=action.timeout, label=f"build {key.label} with DKMS")
    if not result.ok:
        raise StepFailed(f"the DKMS build of {key.label} failed (exit {result.exit_code}):\n{result.tail()}",
                         fix=build_fix(action.fix, result.tail()))
    sensitive, ctx.conn.sensitive = ctx.conn.sensitive, True  # the package's base64 stays out of the host log
    try:
        packed = ctx.run(pack_command(key, action.form), timeout=600, label=f"pack {key.label} for the module cache")
    finally:
        ctx.conn.sensitive = sensitive
    try:
        vermagic, filename, data = parse_pack(packed.stdout) if packed.ok else ("", "", b"")
    except ValueError:
        vermagic, filename, data = "", "", b""
    if not data or not vermagic.startswith(f"{key.kernel} "):
        raise StepFailed(f"the module was built, but packing it for the module cache failed (exit "
                         f"{packed.exit_code}; vermagic {vermagic!r}): {packed.stderr.strip()[-300:]}",
                         fix="dpkg-deb and modinfo must work on the host; or set module_cache: off")
    try:
        store.put(key, filename, data, vermagic, ctx.host.name)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # a share handed out read-only: still installed
            ctx.notes.append(f"module cache: {key.label} was built here and installed; {store.root} is read-only "
                             f"to this controller ({exc.strerror}), so the build was not added to it")
            return
        raise StepFailed(f"the module was built, but the module cache {store.root} cannot be written: {exc}",
                         fix="make the folder writable, name another with module_cache: PATH, or module_cache: off"
                         ) from None
    if url := source_of(store.root):
        ctx.notes.append(f"module cache: {key.label} was built here: {url} is read-only to gpunode, so the build is in "
                         f"{store.folder(key)}; copy that folder to {url.rstrip('/')}/{key.path}/ (e.g. aws s3 sync, "
                         "ossutil cp -r) for the next nodes of the group")
