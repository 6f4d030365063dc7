"""Precompiled modules or a DKMS build: Canonical's signed modules per kernel in the archive, NVIDIA's precompiled
kmod packages for EL kernels; what the probe asks for them and which packages the install then takes."""

from __future__ import annotations

from gpunode.connection import q
from gpunode.distros import DriverPackages, el_kernel_stem, for_os
from gpunode.distros.rpm import EL, precompiled_kmods
from gpunode.facts import Facts
from gpunode.steps.base import StepContext
from gpunode.steps.pkgmgr import PackageManager
from gpunode.steps.probe import Snippets
from gpunode.vendor_facts import value


def archive_precompiled(facts: Facts, method: str) -> bool:
    """The distro's archive has signed precompiled modules per kernel for this method (checked before DKMS)."""
    return for_os(facts.os).archive_precompiled(method)


def rpm_dkms(facts: Facts, method: str) -> bool:
    """NVIDIA's dnf module with a DKMS stream (every RPM install but the runfile's)."""
    return for_os(facts.os).nvidia_dnf_module(method)


def precompiled_probe(facts: Facts, manager: PackageManager, names: list[str], method: str, branch: int,
                      flavor: str) -> Snippets:
    """An archive with precompiled modules: those for the running kernel join the installed-packages query
    (`names`), and on a host with neither install of the branch (facts), `precompiled` lists the kernels the
    archive has the branch's modules for. A converged host pays nothing: its answer is in the facts."""
    if not archive_precompiled(facts, method):
        return {}
    distro = for_os(facts.os)
    precompiled = distro.archive_precompiled_packages(branch, flavor, facts.kernel.running)
    names += [p for p in precompiled.packages if p not in names]
    have = facts.installed_packages
    if distro.dkms_headless_package(branch, flavor) in have or distro.modules_package(precompiled) in have:
        return {}
    return {"precompiled": manager.available_probe(distro.precompiled_prefix(branch, flavor))}


def el_precompiled(facts: Facts, method: str, flavor: str) -> bool:
    """NVIDIA's precompiled streams hold the proprietary modules, built for EL kernels."""
    if not rpm_dkms(facts, method) or not el_kernel_stem(facts.kernel.running):
        return False
    return flavor == "proprietary"


def el_precompiled_probe(facts: Facts, pkgs: DriverPackages, names: list[str], method: str, branch: int,
                         flavor: str) -> Snippets:
    """EL: an installed precompiled kmod of the running kernel (facts) joins the installed-packages query; on a
    host without a driver, `precompiled` asks NVIDIA's repository (a temporary repository and cache: nothing
    on the host changes) for the branch's kmod packages built for the running kernel."""
    if not el_precompiled(facts, method, flavor):
        return {}
    have = facts.installed_packages
    installed = precompiled_kmods(set(have), branch, facts.kernel.running)
    names += [n for n in installed[:1] if n not in names]
    if installed or pkgs.version_from in have or pkgs.packages[-1] in have:
        return {}
    base = pkgs.repo_add.rsplit(" ", 1)[-1].rsplit("/", 1)[0]
    pattern = f"kmod-nvidia-{branch}.*-{el_kernel_stem(facts.kernel.running)}"
    return {"precompiled": f"t=$(mktemp -d) && dnf -q --setopt=cachedir=\"$t\" --repofrompath=gpunode-nvidia,"
            f"{base} --repo=gpunode-nvidia --setopt=gpunode-nvidia.module_hotfixes=1 repoquery --qf '%{{name}}' "
            f"{q(pattern)} 2>/dev/null; rm -rf \"$t\""}


def _offered(ctx: StepContext) -> list[str]:
    """What `precompiled` lists: asked only of a host with no install of the branch in its facts (else [])."""
    return ctx.probe["precompiled"].split() if ctx.probe.asked("precompiled") else []


def _choose_el_build(ctx: StepContext, pkgs: DriverPackages, method: str, branch: int, flavor: str, why: str,
                     installed: dict[str, str]) -> tuple[DriverPackages, str]:
    """EL: NVIDIA's precompiled stream nvidia-driver:<branch> when it has a kmod for the target kernel, the
    -dkms stream otherwise; a host whose driver is the DKMS build stays so."""
    if not el_precompiled(ctx.facts, method, flavor) or pkgs.packages[-1] in installed:
        return pkgs, why
    target = ctx.target_kernel
    kmods = precompiled_kmods(set(installed), branch, target) or \
        precompiled_kmods(_offered(ctx), branch, target)
    stream = value(EL, "precompiled_stream").format(branch=branch)
    if kmods:
        return for_os(ctx.facts.os).kmod_packages(branch, kmods[0]), \
            f"{why}; NVIDIA's precompiled stream nvidia-driver:{stream} has {kmods[0]} for kernel {target}"
    return pkgs, f"{why}; NVIDIA's precompiled stream nvidia-driver:{stream} has no kmod for kernel {target}: " \
        f"DKMS ({pkgs.module_stream})"


def choose_build(ctx: StepContext, pkgs: DriverPackages, method: str, branch: int, flavor: str, why: str,
                 installed: dict[str, str]) -> tuple[DriverPackages, str]:
    """An archive with precompiled modules: those for the target kernel when the archive has them, DKMS
    otherwise (the order of the distro's own driver detection); a host whose driver is the DKMS build stays so.
    (packages, reason)"""
    if rpm_dkms(ctx.facts, method):
        return _choose_el_build(ctx, pkgs, method, branch, flavor, why, installed)
    if not archive_precompiled(ctx.facts, method) or pkgs.packages[0] in installed:
        return pkgs, why
    target = ctx.target_kernel
    distro = for_os(ctx.facts.os)
    precompiled = distro.archive_precompiled_packages(branch, flavor, target)
    modules = distro.modules_package(precompiled)
    offered = set(_offered(ctx))
    if modules in installed or modules in offered:
        return precompiled, f"{why}; Canonical's signed precompiled modules for kernel {target} ({modules})"
    return pkgs, f"{why}; no precompiled modules for kernel {target} in the archive ({modules}): DKMS build"
