"""`nvidia_driver`: the driver for the kernel that will run, nouveau out of the way, packages held.

The step plans in this module; its parts live beside it: the packages' install (nvidia_install.py), precompiled
modules or DKMS (nvidia_precompiled.py), the DKMS builds (nvidia_dkms.py), the module cache around the install
(nvidia_cache.py), the runfile (nvidia_runfile.py), nouveau (nvidia_nouveau.py), the fabric manager
(nvidia_fabric.py), and what a driver change removes and holds (nvidia_switch.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

from gpunode.distros import DriverPackages, UnsupportedDistro, for_os
from gpunode.facts import Facts
from gpunode.facts.packages import upstream_version
from gpunode.gpu.modules import choose_kernel_modules
from gpunode.parsers.systemd import parse_is_enabled
from gpunode.steps.apt_sources import sources_actions, sources_probe
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.cache_setting import check_cache_setting
from gpunode.steps.initramfs_left import left_initramfs_pause
from gpunode.steps.initramfs_pause import PAUSE_PROBE as INITRAMFS_PAUSE_PROBE
from gpunode.steps.kube_node import probe_snippet, verify_only
from gpunode.steps.module_cache import ModuleAction, apply_module
from gpunode.steps.nvidia_cache import (
    PAUSE_PROBE,
    CachedInstall,
    cache_use,
    cached_install,
    install_around_cache,
    left_pause_actions,
    module_after_install,
    module_outlook,
)
from gpunode.steps.nvidia_dkms import DKMS_JOBS_CONF, dkms_actions, dkms_jobs_actions, next_boot_actions
from gpunode.steps.nvidia_fabric import fabricmanager_actions, ready_actions
from gpunode.steps.nvidia_install import install_action, missing_packages
from gpunode.steps.nvidia_nouveau import (
    NOUVEAU_CONF,
    STALE_INITRAMFS,
    initramfs_actions,
    nouveau_actions,
)
from gpunode.steps.nvidia_precompiled import (
    archive_precompiled,
    choose_build,
    el_precompiled_probe,
    precompiled_probe,
    rpm_dkms,
)
from gpunode.steps.nvidia_runfile import PERSISTENCED_UNIT, RUNFILE_BUILD_TOOLS, runfile_actions, runfile_installs
from gpunode.steps.nvidia_switch import (
    check_driver_version,
    hold_action,
    leftover_flavour_action,
    rpm_switch,
    unhold_first,
    update_holds,
    update_reason,
)
from gpunode.steps.packages import repair_first
from gpunode.steps.pkgmgr import PackageManager, Wanted, manager_for
from gpunode.steps.probe import Snippets, nested
from gpunode.steps.remote_file import probe_file


@register
@dataclass
class NvidiaDriverStep(Step):
    """Install the NVIDIA driver (distro packages, NVIDIA's CUDA repo, or a runfile) for the target kernel."""

    kind = "nvidia_driver"
    disturbs_gpus = True
    facts_sections = frozenset({"pkgmgr", "packages", "services", "gpu"})
    method: Literal["distro", "cuda-repo", "runfile"] = arg("distro", "where the driver comes from: the distro's "
                                                            "packages, NVIDIA's CUDA repository or a runfile")
    branch: int = arg(535, "the driver branch (535, 550, 570, ...)")
    kernel_modules: Literal["auto", "open", "proprietary"] = arg("auto", "open or proprietary kernel modules; auto: "
                                                                 "from the GPUs' PCI device ids and the branch")
    runfile: str | None = arg(None, "method runfile: the runfile's path on the host or its URL")
    fabricmanager: Literal["auto", "yes", "no"] = arg("auto", "the fabric manager and NSCQ; auto: when the host "
                                                      "has NVSwitches")
    version: str | None = arg(None, "the driver's exact version within the branch (535.309.01): an installed driver "
                                    "of another version is updated to it; unset: the newest of the branch at the "
                                    "first install, kept afterwards")
    hold: bool = arg(True, "hold the driver packages and their separately versioned kin (nvidia-modprobe...): apt-mark "
                           "hold, dnf versionlock")
    persistenced: bool = arg(True, "enable nvidia-persistenced")
    allow_secure_boot: bool = arg(False, "build with Secure Boot on (the modules must be signed with an enrolled "
                                         "key)")
    module_cache: str | bool = arg("off", "a controller folder (\"\" the default one) or an https URL (read-only): "
                                          "the module built once per kernel group, off: built on every host")
    timeout: int = arg(3600, "seconds for the install")
    cloud_driver: Literal["keep", "replace"] = arg("keep", "keep: on a Kubernetes node whose cloud installed the "
                                                   "driver and runs NVIDIA's device plugin (ACK, TKE GPU node pools), "
                                                   "verify it only; replace: install this step's driver anyway")

    def __post_init__(self) -> None:
        if self.method == "runfile" and not self.runfile:
            raise ValueError("nvidia_driver.runfile (a URL or a path on the host) is required with method: runfile")
        check_cache_setting(self.module_cache, "module_cache")
        check_driver_version(self.version, self.branch)

    def _packages(self, facts: Facts) -> tuple[DriverPackages, str, str]:
        distro = for_os(facts.os)
        try:
            distro.check_supported()
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix="provision a supported distribution (docs/gpu-node.md lists them)") \
                from None
        flavor, why = choose_kernel_modules([g.device_id for g in facts.gpus if not g.is_nvswitch], self.branch,
                                            self.kernel_modules)
        if self.method == "runfile":
            return DriverPackages((), (), "nvidia", ()), flavor, why
        try:
            distro.check_driver_choice(self.method, self.branch)  # a branch the archive does not ship or ended
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix=exc.fix) from None
        try:
            return distro.driver_packages(self.method, self.branch, flavor), flavor, why
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix="choose another method (cuda-repo or runfile)") from None

    def _wants_fabricmanager(self, facts: Facts) -> bool:
        return self.fabricmanager == "yes" or (self.fabricmanager == "auto" and facts.nvswitch_present)

    def probe(self, facts: Facts) -> Snippets:
        if self.cloud_driver == "replace":
            return self._install_probe(facts)
        try:
            return {"kube_node": probe_snippet(), **self._install_probe(facts)}
        except StepFailed:  # e.g. no driver packages for this distro: a node whose cloud installed one needs none
            return {"kube_node": probe_snippet()}

    def _install_probe(self, facts: Facts) -> Snippets:
        pkgs, flavor, _ = self._packages(facts)
        manager = manager_for(facts.os.package_manager)
        snippets = {"nouveau": probe_file(NOUVEAU_CONF), "initramfs": STALE_INITRAMFS,
                    "initramfs_pause": INITRAMFS_PAUSE_PROBE,
                    "dkms": "dkms status 2>/dev/null", "held": manager.held_probe(),
                    "persistenced": "systemctl is-enabled nvidia-persistenced 2>/dev/null"}
        names = list(pkgs.packages) + list(pkgs.fabricmanager if self._wants_fabricmanager(facts) else ())
        snippets.update(precompiled_probe(facts, manager, names, self.method, self.branch, flavor))
        snippets.update(el_precompiled_probe(facts, pkgs, names, self.method, self.branch, flavor))
        if rpm_dkms(facts, self.method):
            snippets["dkms_conf"] = probe_file(DKMS_JOBS_CONF)
        elif pkgs.dkms_module:  # where the install pauses autoinstall: a pause left by a run cut short
            snippets["no_autoinstall"] = PAUSE_PROBE
        fresh = pkgs.version_from not in facts.installed_packages  # the version the install brings is not known yet
        candidate = for_os(facts.os).driver_candidate_probe(pkgs, self.branch) if fresh and pkgs.dkms_module else ""
        if candidate and self._cache_use(facts):
            snippets["candidate"] = candidate
        if self.method == "runfile":
            names += RUNFILE_BUILD_TOOLS
            snippets["unit"] = probe_file(PERSISTENCED_UNIT)
        if names:
            snippets.update(nested("pkgs", manager.probe(names)))
        if for_os(facts.os).driver_components(self.method):
            snippets["apt_sources"] = sources_probe()
        return snippets

    def _cache_use(self, facts: Facts) -> bool:
        """The module cache is used (nvidia_cache.py `cache_use`)."""
        return cache_use(self.module_cache, self.method)

    def plan(self, ctx: StepContext) -> list[Action]:
        kept = verify_only(ctx, "NVIDIA driver", "nvidia-smi --query-gpu=index,name,driver_version --format=csv,"
                           "noheader", "cloud_driver") if self.cloud_driver == "keep" else []
        if kept:
            return kept
        facts = ctx.facts
        pkgs, flavor, why = self._packages(facts)
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(ctx.probe.within("pkgs")).installed
        pkgs, why = choose_build(ctx, pkgs, self.method, self.branch, flavor, why, installed)
        wants_fm = self._wants_fabricmanager(facts)
        self._refuse_early(facts, pkgs, wants_fm)
        sections = ctx.probe
        target = self._target(ctx)
        distro = for_os(facts.os)
        # a run cut short (a power cut during the driver's install): gpunode's pause of DKMS autoinstall goes first,
        # then the transaction is finished, whatever else is planned (the driver package's postinst builds then)
        held = manager.parse_held(sections["held"])
        # a failed attempt at the other flavour (its build left half-configured) goes before the repair would build
        # it again
        leftover, removed = leftover_flavour_action(facts, distro, self.method, self.branch, flavor, held)
        paused = sections["no_autoinstall"] if sections.asked("no_autoinstall") else ""  # DKMS installs, not EL's
        left = left_initramfs_pause(sections["initramfs_pause"], ctx.state.initramfs_held)  # not this run's own
        actions: list[Action] = left_pause_actions(paused) + leftover + \
            repair_first(ctx, manager, self.timeout, removed) + left
        needed = distro.driver_components(self.method)  # `apt_sources` is asked only where components are needed
        actions += sources_actions(sections["apt_sources"] if needed else "", needed, distro.is_archive_entry,
                                   distro.driver_components_reason)
        actions += nouveau_actions(ctx) + dkms_jobs_actions(ctx, flavor, pkgs, rpm_dkms(facts, self.method))
        switch = rpm_switch(pkgs, installed, self.branch)
        update = update_reason(pkgs, installed, self.version)
        missing = missing_packages(facts, pkgs, installed, switch, self.method, self.branch, self.version)
        lifted = update_holds([*pkgs.pinned], facts, held) if update else []  # let go of first, held again after
        if update:
            held, why = held - set(lifted), f"{update}; {why}"
        if missing:
            actions.append(self._cached_install(ctx, manager, pkgs, flavor, why, missing, held, switch))
        runfile_runs = runfile_installs(facts, self.method, self.branch)
        if self.method == "runfile":
            actions += runfile_actions(facts, manager, installed, flavor, target, sections["unit"],
                                       source=self.runfile or "", installs=runfile_runs,
                                       persistenced=self.persistenced, timeout=self.timeout)
        driver_version = upstream_version(installed[pkgs.version_from]) \
            if pkgs.version_from in installed and not switch else None
        if pkgs.packages and pkgs.dkms_module and not missing:
            module = for_os(facts.os).dkms_module_name(self.method, flavor, driver_version)
            actions += dkms_actions(ctx, module, driver_version, flavor, method=self.method, cache=self.module_cache,
                                    timeout=self.timeout)
            actions += next_boot_actions(ctx, module, driver_version, flavor, method=self.method,
                                         cache=self.module_cache, timeout=self.timeout)
        fm = pkgs.fabricmanager if wants_fm else ()
        actions += fabricmanager_actions(manager, pkgs, fm, installed, driver_version, self.timeout)
        installing = bool(missing) or runfile_runs
        actions += self._keep_actions(ctx, manager, [*pkgs.pinned, *fm], held, bool(switch), installing)
        actions = unhold_first(actions, manager, lifted)
        return actions + ready_actions(ctx, installing, wants_fm, self.persistenced) + initramfs_actions(ctx, actions)

    @staticmethod
    def _target(ctx: StepContext) -> str:
        """The kernel to build for; one that does not run yet, chosen here because no kernel step ran (`--tags
        driver`), becomes the run's target and asks for the reboot into it."""
        target, running = ctx.target_kernel, ctx.facts.kernel.running
        if target != running and not ctx.state.target_kernel:
            ctx.state.target_kernel = target  # a reboot step then checks that the host booted it
            ctx.require_reboot(f"the driver is built for kernel {target} (installed with its headers); {running} "
                               "runs without headers")
        return target

    def _cached_install(self, ctx: StepContext, manager: PackageManager, pkgs: DriverPackages, flavor: str, why: str,
                        missing: list[Wanted], held: set[str], switch: str) -> Action:
        """The driver packages' install, through the module cache where it is on and the module is DKMS-built."""
        distro = for_os(ctx.facts.os)
        install = install_action(ctx, manager, pkgs, flavor, why, missing, held, switch, method=self.method,
                                 branch=self.branch, downgrades=bool(self.version), timeout=self.timeout)
        use = self._cache_use(ctx.facts) and bool(pkgs.dkms_module)
        # asked only for a fresh DKMS install with the module cache on, where the distro can ask it
        candidate = ctx.probe["candidate"].strip() if ctx.probe.asked("candidate") else ""
        version = candidate.splitlines()[-1] if candidate else ""
        outlook = module_outlook(ctx, self.method, flavor, version, cache=self.module_cache,
                                 timeout=self.timeout) if use else ""
        action = cached_install(install, use, pkgs.version_from, flavor,
                                distro.driver_version_probe(pkgs, self.branch) if distro.module_cache_before_install
                                else None, version=version, outlook=outlook)
        action.initramfs_once = distro.package_format == "deb"  # one generation after it: steps/initramfs_pause.py
        return action

    def _keep_actions(self, ctx: StepContext, manager: PackageManager, pinned: list[str], held: set[str],
                      switch: bool, installing: bool) -> list[Action]:
        """The driver packages and their kin held (unattended upgrades cause version mismatches) and
        nvidia-persistenced enabled."""
        actions = hold_action(manager, pinned, held, switch, installing, ctx.facts) if self.hold else []
        if self.persistenced and parse_is_enabled(ctx.probe["persistenced"]) not in ("enabled", "static"):
            actions.append(Action("enable nvidia-persistenced", "keeps the GPUs initialised between jobs",
                                  "systemctl enable nvidia-persistenced",
                                  fix="the driver packages provide the unit; check that they installed"))
        return actions

    def _refuse_early(self, facts: Facts, pkgs: DriverPackages, wants_fm: bool) -> None:
        """Secure Boot without a key, or NVSwitches without a fabric manager package: fail before any change."""
        # Canonical's signatures package (none on arm64); NVIDIA's EL kmods need NVIDIA's key enrolled in MOK
        signed = not pkgs.dkms_module and any(p.startswith("linux-signatures-nvidia-") for p in pkgs.packages)
        if facts.secure_boot and not self.allow_secure_boot and not signed:
            no_signed = " (the archive has no signed precompiled modules for this kernel)" \
                if archive_precompiled(facts, self.method) else ""
            raise StepFailed(
                f"Secure Boot is enabled: an unsigned DKMS-built nvidia module will not load{no_signed}",
                fix="enrol a Machine Owner Key for DKMS (mokutil --import /var/lib/dkms/mok.pub, then confirm at "
                "the console on reboot), use signed precompiled packages (Ubuntu linux-modules-nvidia-*), disable "
                "Secure Boot, or set allow_secure_boot: true if the key is already enrolled",
            )
        if wants_fm and not pkgs.fabricmanager:
            raise StepFailed(f"NVSwitches are present, but {facts.os.pretty_name or facts.os.id} has no fabric "
                             f"manager package for method {self.method}; CUDA fails without one",
                             fix="use method: cuda-repo (NVIDIA's repository has nvidia-fabricmanager), or "
                             "fabricmanager: no if the fabric manager is installed by other means")

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        """As every step, except the module cache's actions (gpunode/steps/module_cache.py, nvidia_cache.py)."""
        for action in actions:
            if isinstance(action, ModuleAction):
                ctx.notes.append(f"{action.key.label if action.key else 'nvidia'}: {apply_module(ctx, action)}")
                continue
            if isinstance(action, CachedInstall) and action.version_probe is not None:
                install_around_cache(ctx, action, partial(Step.apply, self, ctx, [action]), self.method,
                                     cache=self.module_cache, timeout=self.timeout)
                continue
            super().apply(ctx, [action])
            if isinstance(action, CachedInstall):
                module_after_install(ctx, action, self.method, cache=self.module_cache, timeout=self.timeout)
