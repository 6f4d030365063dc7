"""The NVIDIA driver packages' install: which packages at which version, and the one command that lets go of held
packages in the way, adds the repositories (dkms's, the CUDA keyring fetched with curl), switches NVIDIA's dnf module
stream and installs them."""

from __future__ import annotations

from gpunode.distros import DriverPackages, UnsupportedDistro, for_os
from gpunode.facts import Facts
from gpunode.steps.base import Action, StepContext, StepFailed
from gpunode.steps.nvidia_dkms import with_build_errors
from gpunode.steps.nvidia_switch import DRIVER_VERSION, stale_holds
from gpunode.steps.pkgmgr import AptManager, PackageManager, Wanted

CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"  # cuda-repo's keyring package on apt


def curl_first(facts: Facts, manager: PackageManager) -> str:
    """A shell test that installs curl and ca-certificates when the host lacks them (minimal images do), before a
    command fetches over https with curl; as the container toolkit step does on apt."""
    bundle = for_os(facts.os).ca_bundle
    install = manager.install([Wanted("curl"), Wanted("ca-certificates")], refresh=True, recommends=False)
    return f"{{ {{ command -v curl >/dev/null && [ -s {bundle} ]; }} || {{ {install}; }}; }}"


def fetch_tools_first(facts: Facts, manager: PackageManager, setup: str) -> str:
    """The CUDA repository's setup, preceded on apt by curl (the keyring package is fetched with it) when the
    keyring is not there yet."""
    if CUDA_KEYRING not in setup:
        return setup
    return f"{{ [ -e {CUDA_KEYRING} ] || {curl_first(facts, manager)}; }} && {{ {setup}; }}"


def dkms_repos(facts: Facts) -> str:
    """The repositories dkms comes from (EPEL + CodeReady Builder on EL); none when dkms is already installed."""
    if "dkms" in facts.installed_packages:
        return ""
    try:
        return for_os(facts.os).extra_repos(facts.pkg)
    except UnsupportedDistro as exc:
        raise StepFailed(str(exc), fix=exc.fix) from None


def kernel_to_run(ctx: StepContext) -> str:
    """The kernel the driver is built for, as a reason names it (check mode: it may be known only in the run)."""
    if ctx.state.target_kernel_unknown:
        return "the kernel that will run (unknown until run: an earlier step may install a new one)"
    return ctx.target_kernel


def missing_packages(facts: Facts, pkgs: DriverPackages, installed: dict[str, str], switch: str, method: str,
                     branch: int, version: str | None) -> list[Wanted]:
    """The driver packages to install (all of them when the module stream switches), pinned to `version` when it
    is set."""
    pin = (f"{version}*" if version else None) or for_os(facts.os).driver_pin(method, branch) \
        or (f"{pkgs.version}*" if pkgs.version else None)
    wanted = [Wanted(p, pin if p in pkgs.pinned and not p.startswith("kmod-") else None) for p in pkgs.packages]
    return wanted if switch else [w for w in wanted if not w.satisfied_by(installed.get(w.name))]


def install_action(ctx: StepContext, manager: PackageManager, pkgs: DriverPackages, flavor: str, why: str,
                   missing: list[Wanted], held: set[str], switch: str, *, method: str, branch: int, downgrades: bool,
                   timeout: int) -> Action:
    """One command: held packages in the way let go, repositories, the module stream (switched NVIDIA's way
    when the branch or flavour changes), the packages."""
    facts, target = ctx.facts, ctx.target_kernel
    ctx.will_install(w.name for w in missing)  # check mode: later steps (dcgm, services) plan for the driver
    stale = stale_holds(facts, pkgs, method, branch, flavor, held, switch)
    setup = pkgs.module_switch() if switch else pkgs.repo_setup
    setup = fetch_tools_first(facts, manager, setup)  # cuda-repo on apt: the keyring package is fetched with curl
    repos = dkms_repos(facts) if pkgs.dkms_module else ""  # precompiled modules need no dkms
    steps = [manager.unhold(stale) if stale else "", repos, setup]
    setup = " && ".join(x for x in steps if x)
    install = manager.install(missing, refresh=ctx.lists_stale or bool(setup), recommends=False, downgrades=downgrades)
    reason = f"{why}; building for kernel {kernel_to_run(ctx)}" if pkgs.dkms_module else \
        f"{why}; for kernel {kernel_to_run(ctx)}"
    if switch or stale:
        reason = f"{switch or 'held packages of another branch or flavour are in the way: ' + ', '.join(stale)}; " \
            f"{reason}"
    exact = next((v for v in (str(w.version).rstrip("*") for w in missing if w.version) if DRIVER_VERSION.match(v)),
                 "")  # the step's `version`, pinned as VERSION* (a branch pin, 535.*, is no version)
    return Action(
        f"install the NVIDIA {branch} driver{' ' + exact if exact else ''} ({flavor} modules): "
        f"{', '.join(w.name for w in missing)}",
        reason, with_build_errors(f"{setup} && {{ {install}; }}" if setup else install), timeout=timeout,
        installs=tuple(AptManager.specs(missing)),
        fix="read the DKMS build log (/var/lib/dkms/*/*/build/make.log) and check that the headers for "
        f"{target} are installed")
