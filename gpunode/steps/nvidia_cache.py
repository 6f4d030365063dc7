"""The NVIDIA driver's packages through the module cache: installed with DKMS's autoinstall paused (apt) or with the
cached build put in place first (NVIDIA's kmod RPM), then the module for the target kernel from the cache; a pause
left by a run cut short removed. The cache itself: gpunode/steps/module_cache.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpunode.connection import q
from gpunode.distros import for_os
from gpunode.steps.base import Action, StepContext, StepFailed
from gpunode.steps.cache_setting import cache_store
from gpunode.steps.module_cache import apply_around, apply_module, plan_module
from gpunode.steps.pkgmgr import manager_for


@dataclass
class CachedInstall(Action):
    """The driver's packages installed with DKMS's autoinstall off (/etc/dkms/no-autoinstall, which Debian's
    dkms common.postinst honours); the step then installs the module from the module cache."""

    version_from: str = ""
    flavor: str = ""
    version_probe: str | None = None  # RPM: shell printing the version the install brings; the tree goes in first
    version: str = ""                 # the version the install is expected to bring, asked in the probe ("": unknown)


NO_AUTOINSTALL = "/etc/dkms/no-autoinstall"
# The first line gpunode writes into it, so that a file left by a run cut short (power cut, lost connection: the
# trap that removes it never ran) is known as gpunode's and removed by the next run, and a user's own file is kept.
NO_AUTOINSTALL_MARK = "# gpunode: DKMS autoinstall paused while the NVIDIA driver installs; removed when that ends"
PAUSE_PROBE = f"head -n 1 {NO_AUTOINSTALL} 2>/dev/null"


def cache_use(module_cache: str | bool, method: str) -> bool:
    """The module cache is used: asked for and a packaged driver. On apt the driver packages go in with Debian's
    autoinstall paused (/etc/dkms/no-autoinstall), on RPM the cached tree goes in first, since the kmod
    package's %post builds at once (gpunode/distros/rpm.py, EL `kmod_post`)."""
    return cache_store(module_cache) is not None and method != "runfile"


def cached_install(install: Action, use: bool, version_from: str, flavor: str, version_probe: str | None = None,
                   version: str = "", outlook: str = "") -> Action:
    """`install` unchanged without the cache; else the same install with DKMS's autoinstall paused around it (a
    no-autoinstall file of the user's own stays), or, where the packages' own scriptlet builds at once
    (`version_probe` not None: NVIDIA's kmod RPM, whose %post no setting pauses), the install as it is, with the
    cached build put in place before it."""
    if not use or install.command is None:
        return install
    first = ", put in place first" if version_probe is not None else ""
    said = f" (kernel module: {outlook})" if outlook else f" (the kernel module from the module cache{first})"
    if version_probe is not None:
        return CachedInstall(install.summary + said,
                             install.reason + "; the module is built once per group of hosts (module_cache): the "
                             "kmod package's %post runs dkms build/install at once, and dkms skips a module already "
                             "built, so a cached build of the version the repository installs goes in first",
                             install.command, timeout=install.timeout, fix=install.fix, version_from=version_from,
                             flavor=flavor, version_probe=version_probe, version=version)
    command = (f"mine=; if [ ! -e {NO_AUTOINSTALL} ] || {_is_ours()}; then mkdir -p /etc/dkms && "
               f"echo {q(NO_AUTOINSTALL_MARK)} > {NO_AUTOINSTALL} && mine=1; fi; "
               f"trap '[ -z \"$mine\" ] || rm -f {NO_AUTOINSTALL}' EXIT; {install.command}")
    return CachedInstall(install.summary + said,
                         install.reason + "; the module is built once per group of hosts (module_cache)", command,
                         timeout=install.timeout, fix=install.fix, installs=install.installs, version_from=version_from,
                         flavor=flavor, version=version)


def _is_ours() -> str:
    """Shell: true when /etc/dkms/no-autoinstall is the one gpunode writes (its first line is the mark)."""
    return f"[ \"$(head -n 1 {NO_AUTOINSTALL} 2>/dev/null)\" = {q(NO_AUTOINSTALL_MARK)} ]"


def left_pause_actions(probed: str) -> list[Action]:
    """The no-autoinstall file of a gpunode run cut short (its first line, `probed`, is gpunode's mark) removed:
    while it is there, DKMS's kernel hook builds no module for a new kernel. A user's own file stays."""
    if probed.splitlines()[:1] != [NO_AUTOINSTALL_MARK]:
        return []
    return [Action(f"remove {NO_AUTOINSTALL}", "gpunode's own pause of DKMS autoinstall, left by a run that was cut "
                   "short: while it is there, the next kernel gets no NVIDIA module",
                   f"if {_is_ours()}; then rm -f {NO_AUTOINSTALL}; fi")]


def module_outlook(ctx: StepContext, method: str, flavor: str, version: str, *, cache: str | bool,
                   timeout: int) -> str:
    """Check mode with the module cache: what this host does for the kernel module, said in the install's
    summary: build it for its group (the first host of the group to plan), wait for that host's build, or install
    the cached entry (the group's key from the version the package lists offer now). "" when applying."""
    if not ctx.check:
        return ""
    if not version:
        return ("from the module cache if its group's entry is there, else built by the group's first host; its "
                "version is not known before the install")
    module = for_os(ctx.facts.os).dkms_module_name(method, flavor, version)
    return plan_module(ctx, module, version, ctx.target_kernel, cache=cache, flavour=flavor, timeout=timeout).summary


def install_around_cache(ctx: StepContext, action: CachedInstall, run: Callable[[], None], method: str, *,
                         cache: str | bool, timeout: int) -> None:
    """RPM: the version the install brings asked first (NVIDIA's repository, nothing changes), the cached build
    of that version for the target kernel placed, then the packages (`run` carries out `action`: their %post finds
    the module built); the first host of a group lets the %post build, and its build is published. When the version
    cannot be told first, or the install brings another, the module comes afterwards as on apt."""
    version = action.version  # asked in the probe (the same query), else now
    if not version and action.version_probe:
        read = ctx.run(action.version_probe, label="the driver version to install")
        version = read.stdout.strip().splitlines()[-1] if read.ok and read.stdout.strip() else ""
    manager = manager_for(ctx.facts.os.package_manager)

    def install() -> bool:
        run()
        got = ctx.run(manager.version_of(action.version_from), label="driver version")
        return got.ok and got.stdout.strip() == version

    if version:
        module = for_os(ctx.facts.os).dkms_module_name(method, action.flavor, version)
        planned = plan_module(ctx, module, version, ctx.target_kernel, cache=cache, flavour=action.flavor,
                              timeout=timeout)
        done = apply_around(ctx, planned, install)
        if done:
            ctx.notes.append(f"{planned.key.label if planned.key else module}: {done}")
            return
    else:
        ctx.notes.append("the driver version could not be read from NVIDIA's repository before the install: "
                         "the kmod package's %post builds the module here")
        run()
    module_after_install(ctx, action, method, cache=cache, timeout=timeout)


def module_after_install(ctx: StepContext, action: CachedInstall, method: str, *, cache: str | bool,
                         timeout: int) -> None:
    """The packages went in with DKMS's autoinstall off: the module for the target kernel from the cache (or
    built here and published), its version read from the installed driver package."""
    manager = manager_for(ctx.facts.os.package_manager)
    read = ctx.run(manager.version_of(action.version_from), label="driver version")
    version = read.stdout.strip() if read.ok else ""
    if not version:
        raise StepFailed(f"the driver packages were installed, but {action.version_from}'s version cannot be read",
                         fix="run again: the next run builds the module with DKMS (dkms autoinstall)")
    module = for_os(ctx.facts.os).dkms_module_name(method, action.flavor, version)
    planned = plan_module(ctx, module, version, ctx.target_kernel, cache=cache, flavour=action.flavor,
                          timeout=timeout)
    ctx.notes.append(f"{planned.key.label if planned.key else module}: {apply_module(ctx, planned)}")
