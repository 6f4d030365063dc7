"""The NVIDIA driver's DKMS builds: the module for the target kernel and for the kernel that boots next (through the
module cache when it is on), and the build's make jobs on RPM."""

from __future__ import annotations

from gpunode.connection import q
from gpunode.distros import DriverPackages, for_os
from gpunode.distros.rpm import EL
from gpunode.modcache.dkms_shell import installed_check
from gpunode.parsers.dkms import diverged_entries, dkms_installed, parse_dkms
from gpunode.steps.base import Action, StepContext
from gpunode.steps.module_cache import plan_module
from gpunode.steps.nvidia_cache import cache_use
from gpunode.steps.pkgmgr import Wanted, manager_for
from gpunode.steps.remote_file import parse_file_probe, write_action
from gpunode.vendor_facts import value

# NVIDIA's RPM DKMS package builds with `make -j2`; DKMS reads this file after it (distros/rpm.py EL
# dkms_conf_override), so the build uses every core of the machine that builds. $(nproc) is evaluated at each build:
# a baked image keeps the file and still builds with the cores of the instance it boots on.
DKMS_JOBS_CONF = value(EL, "dkms_conf_override").format(module="nvidia")
DKMS_JOBS_CONTENT = ("# Written by gpunode: NVIDIA's dkms.conf builds with make -j2; this builds with all cores.\n"
                     "MAKE[0]=\"" + value(EL, "dkms_make_proprietary").replace("-j2", value(EL, "dkms_all_cores"))
                     + "\"\n")


def with_build_errors(command: str) -> str:
    """`command`, and when it fails, the compiler's errors from the DKMS build logs on stderr (so the failure
    message names the cause, e.g. a kernel API the driver source does not know yet)."""
    return (f"{{ {command}; }} || {{ rc=$?; grep -h -m 5 -e ' error: ' -e '^Error!' "
            "/var/lib/dkms/*/*/build/make.log >&2 2>/dev/null; exit $rc; }")


def dkms_jobs_actions(ctx: StepContext, flavor: str, pkgs: DriverPackages, rpm_dkms: bool) -> list[Action]:
    """RPM: NVIDIA's proprietary DKMS package builds with two jobs; DKMS takes MAKE[0] from /etc/dkms/nvidia.conf
    instead, with all cores (as the ECS and EKS GPU AMIs do). The open package runs `make -j` already: a file of
    ours left from the proprietary flavour (it names the proprietary make target) is removed. `rpm_dkms`: NVIDIA's
    dnf module with a DKMS stream is the install."""
    if not rpm_dkms or not pkgs.dkms_module:
        return []
    current = parse_file_probe(ctx.probe["dkms_conf"])
    if flavor == "open":
        if current.content != DKMS_JOBS_CONTENT:
            return []
        return [Action(f"remove {DKMS_JOBS_CONF}", "written for the proprietary module's make target; the open "
                       "module's dkms.conf uses all cores itself", f"rm -f {DKMS_JOBS_CONF}")]
    if current.content == DKMS_JOBS_CONTENT:
        return []
    write = write_action(DKMS_JOBS_CONF, current, DKMS_JOBS_CONTENT,
                         reason="NVIDIA's dkms.conf builds the module with make -j2: all cores instead")
    write.summary = f"let DKMS build the nvidia module with all cores ({DKMS_JOBS_CONF})"
    return [write]


def dkms_actions(ctx: StepContext, module: str, version: str | None = None, flavor: str = "", kernel: str = "",
                 why: str = "", *, method: str, cache: str | bool, timeout: int) -> list[Action]:
    """Build the driver's DKMS module for the target kernel (or `kernel`, for the reason `why`) when `dkms status`
    lists no build of it (through the module cache `cache` when it is used for `method`)."""
    target = kernel or ctx.target_kernel
    entries = parse_dkms(ctx.probe["dkms"])
    if dkms_installed(entries, (module,), target):
        return []
    if version and cache_use(cache, method):
        return [plan_module(ctx, module, version, target, cache=cache, flavour=flavor, timeout=timeout)]
    diverged = diverged_entries(entries, (module,), target)
    undo = "".join(f"dkms uninstall -m {q(e.module)} -v {q(e.version)} -k {q(target)} >/dev/null; "
                   for e in diverged)
    summary, reason = (f"install the {module} DKMS module for kernel {target} again",
                       f"dkms status: {diverged[0].line!r}: the files in the kernel tree are not the ones it "
                       "built") if diverged else (f"build the {module} DKMS module for kernel {target}",
                                                  "dkms status shows no build for it")
    reason = f"{why}; {reason}" if why else reason
    return [Action(
        summary, reason,
        with_build_errors(f"{undo}dkms autoinstall -k {q(target)} && "
                          f"{{ {installed_check(f'-k {q(target)}', q(target))}; }}"),
        timeout=timeout,
        fix=f"headers for {target} must be installed, and space for the module in /lib/modules/{target}; see "
        f"/var/lib/dkms/{module}/*/build/make.log")]


def next_boot_actions(ctx: StepContext, module: str, version: str | None, flavor: str, *, method: str,
                      cache: str | bool, timeout: int) -> list[Action]:
    """The module for the kernel the bootloader boots next when that is not the target (a kernel an unattended
    upgrade installed after the driver): built there too, its headers installed first when missing, so that
    the reboot into it keeps the GPUs."""
    kernel = ctx.facts.kernel
    following = kernel.next_boot
    if following in (ctx.target_kernel, kernel.running) or ctx.state.target_kernel_unknown:
        return []
    if following in kernel.headers:
        return dkms_actions(ctx, module, version, flavor, following,
                            why=f"the bootloader boots kernel {following} next (the newest installed)",
                            method=method, cache=cache, timeout=timeout)
    if dkms_installed(parse_dkms(ctx.probe["dkms"]), (module,), following):
        return []
    manager = manager_for(ctx.facts.os.package_manager)
    headers = for_os(ctx.facts.os).headers_packages(following, kernel.package)
    install = manager.install([Wanted(name) for name in headers], refresh=True, recommends=False)
    return [Action(
        f"install {', '.join(headers)} and build the {module} DKMS module for kernel {following}",
        f"the bootloader boots kernel {following} next (the newest installed), and it has neither headers nor "
        "the module: after a reboot the GPUs would be gone",
        with_build_errors(f"{install} && dkms autoinstall -k {q(following)} && "
                          f"{{ {installed_check(f'-k {q(following)}', q(following))}; }}"),
        timeout=timeout, installs=tuple(headers),
        fix=f"the headers of kernel {following} must exist in the repositories; else remove that kernel or make "
        "the bootloader boot the running one")]
