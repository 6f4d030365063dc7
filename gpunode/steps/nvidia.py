"""`nvidia_driver`: the driver for the kernel that will run, nouveau out of the way, packages held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import q
from gpunode.distros import DriverPackages, UnsupportedDistro, el_kernel_stem, for_os
from gpunode.distros.rpm import EL, precompiled_kmods
from gpunode.facts import Facts
from gpunode.facts.packages import upstream_version
from gpunode.gpu.driver_facts import NVIDIA
from gpunode.gpu.modules import choose_kernel_modules
from gpunode.modcache.dkms_shell import installed_check
from gpunode.parsers.dkms import diverged_entries, dkms_installed, parse_dkms
from gpunode.parsers.systemd import parse_is_enabled
from gpunode.steps.apt_sources import sources_actions, sources_probe
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.cache_setting import cache_store, check_cache_setting
from gpunode.steps.kube_node import probe_snippet, verify_only
from gpunode.steps.module_cache import ModuleAction, apply_around, apply_module, plan_module
from gpunode.steps.nvidia_switch import (
    check_driver_version,
    hold_action,
    kin_installed,
    leftover_flavour_action,
    update_holds,
)
from gpunode.steps.packages import repair_first
from gpunode.steps.pkgmgr import AptManager, PackageManager, Wanted, manager_for
from gpunode.steps.probe import Snippets, nested
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action
from gpunode.vendor_facts import value

NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_CONTENT = "# Written by gpunode: the NVIDIA driver cannot load while nouveau holds the GPU.\n" \
                  "blacklist nouveau\noptions nouveau modeset=0\n"
# The kernels whose initramfs image is not newer than the nouveau blacklist (it was made before the blacklist, so it
# lacks it): those of /lib/modules with an image (initramfs-tools: /boot/initrd.img-K; dracut: /boot/initramfs-K.img,
# which also leaves out the EL rescue and kdump images). The probe lists them; the rebuild, run after the packages,
# rebuilds only those still stale then: the driver's own install regenerates the newest kernel's image on Debian
# (initramfs-tools' trigger), so the blacklist costs no generation of its own there.
STALE_INITRAMFS = (f"c={NOUVEAU_CONF}; if [ -e \"$c\" ]; then for m in /lib/modules/*; do k=${{m##*/}}; "
                   "for f in \"/boot/initrd.img-$k\" \"/boot/initramfs-$k.img\"; do "
                   "if [ -e \"$f\" ] && [ ! \"$f\" -nt \"$c\" ]; then echo \"$k\"; fi; done; done; fi")
# update-initramfs {-c|-d|-u} [-k version] (update-initramfs(8) of initramfs-tools 0.142, its usage() read on a lab
# host); dracut [OPTION...] [<image> [<kernel version>]], -f overwrites (dracut(8): dracutdevs/dracut
# man/dracut.8.asc, SYNOPSIS and OPTIONS, at edc88f66aa53be1d6e04de95b17d5fe94a6d40e5).
REBUILD_STALE_INITRAMFS = (f"for k in $({STALE_INITRAMFS}); do if command -v update-initramfs >/dev/null; then "
                           "update-initramfs -u -k \"$k\" || exit; elif command -v dracut >/dev/null; then "
                           "dracut -f \"/boot/initramfs-$k.img\" \"$k\" || exit; fi; done")
# The runfile installs nvidia-persistenced but no unit for it (NVIDIA ships only a sample in the docs).
PERSISTENCED_UNIT = "/etc/systemd/system/nvidia-persistenced.service"
PERSISTENCED_CONTENT = """# Written by gpunode: nvidia-persistenced for a runfile-installed driver.
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""
RUNFILE_BUILD_TOOLS = ["gcc", "make", "dkms"]
# NVIDIA's RPM DKMS package builds with `make -j2`; DKMS reads this file after it (distros/rpm.py EL
# dkms_conf_override), so the build uses every core of the machine that builds. $(nproc) is evaluated at each build:
# a baked image keeps the file and still builds with the cores of the instance it boots on.
DKMS_JOBS_CONF = value(EL, "dkms_conf_override").format(module="nvidia")
DKMS_JOBS_CONTENT = ("# Written by gpunode: NVIDIA's dkms.conf builds with make -j2; this builds with all cores.\n"
                     "MAKE[0]=\"" + value(EL, "dkms_make_proprietary").replace("-j2", value(EL, "dkms_all_cores"))
                     + "\"\n")


CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"  # cuda-repo's keyring package on apt


def curl_first(facts: Facts, manager: PackageManager) -> str:
    """A shell test that installs curl and ca-certificates when the host lacks them (minimal images do), before a
    command fetches over https with curl; as the container toolkit step does on apt."""
    bundle = for_os(facts.os).ca_bundle
    install = manager.install([Wanted("curl"), Wanted("ca-certificates")], refresh=True, recommends=False)
    return f"{{ {{ command -v curl >/dev/null && [ -s {bundle} ]; }} || {{ {install}; }}; }}"


@register
@dataclass
class NvidiaDriverStep(Step):
    """Install the NVIDIA driver (distro packages, NVIDIA's CUDA repo, or a runfile) for the target kernel."""

    kind = "nvidia_driver"
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
        pkgs, _, _ = self._packages(facts)
        manager = manager_for(facts.os.package_manager)
        snippets = {"nouveau": probe_file(NOUVEAU_CONF), "initramfs": STALE_INITRAMFS,
                    "dkms": "dkms status 2>/dev/null", "held": manager.held_probe(),
                    "persistenced": "systemctl is-enabled nvidia-persistenced 2>/dev/null"}
        names = list(pkgs.packages) + list(pkgs.fabricmanager if self._wants_fabricmanager(facts) else ())
        snippets.update(self._precompiled_probe(facts, manager, names))
        snippets.update(self._el_precompiled_probe(facts, pkgs, names))
        if self._rpm_dkms(facts):
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

    def _archive_precompiled(self, facts: Facts) -> bool:
        """The distro's archive has signed precompiled modules per kernel for this method (checked before DKMS)."""
        return for_os(facts.os).archive_precompiled(self.method)

    def _rpm_dkms(self, facts: Facts) -> bool:
        """NVIDIA's dnf module with a DKMS stream (every RPM install but the runfile's)."""
        return for_os(facts.os).nvidia_dnf_module(self.method)

    def _precompiled_probe(self, facts: Facts, manager: PackageManager, names: list[str]) -> Snippets:
        """An archive with precompiled modules: those for the running kernel join the installed-packages query
        (`names`), and on a host with neither install of the branch (facts), `precompiled` lists the kernels the
        archive has the branch's modules for. A converged host pays nothing: its answer is in the facts."""
        if not self._archive_precompiled(facts):
            return {}
        distro = for_os(facts.os)
        flavor, _ = choose_kernel_modules([g.device_id for g in facts.gpus if not g.is_nvswitch], self.branch,
                                          self.kernel_modules)
        precompiled = distro.archive_precompiled_packages(self.branch, flavor, facts.kernel.running)
        names += [p for p in precompiled.packages if p not in names]
        have = facts.installed_packages
        if distro.dkms_headless_package(self.branch, flavor) in have or distro.modules_package(precompiled) in have:
            return {}
        return {"precompiled": manager.available_probe(distro.precompiled_prefix(self.branch, flavor))}

    def _el_precompiled(self, facts: Facts) -> bool:
        """NVIDIA's precompiled streams hold the proprietary modules, built for EL kernels."""
        if not self._rpm_dkms(facts) or not el_kernel_stem(facts.kernel.running):
            return False
        flavor, _ = choose_kernel_modules([g.device_id for g in facts.gpus if not g.is_nvswitch], self.branch,
                                          self.kernel_modules)
        return flavor == "proprietary"

    def _el_kmods(self, names: list[str] | set[str], kernel: str) -> list[str]:
        """The precompiled kmod packages of this branch for `kernel` among `names`, newest first."""
        return precompiled_kmods(names, self.branch, kernel)

    def _el_precompiled_probe(self, facts: Facts, pkgs: DriverPackages, names: list[str]) -> Snippets:
        """EL: an installed precompiled kmod of the running kernel (facts) joins the installed-packages query; on a
        host without a driver, `precompiled` asks NVIDIA's repository (a temporary repository and cache: nothing
        on the host changes) for the branch's kmod packages built for the running kernel."""
        if not self._el_precompiled(facts):
            return {}
        have = facts.installed_packages
        installed = self._el_kmods(set(have), facts.kernel.running)
        names += [n for n in installed[:1] if n not in names]
        if installed or pkgs.version_from in have or pkgs.packages[-1] in have:
            return {}
        base = pkgs.repo_add.rsplit(" ", 1)[-1].rsplit("/", 1)[0]
        pattern = f"kmod-nvidia-{self.branch}.*-{el_kernel_stem(facts.kernel.running)}"
        return {"precompiled": f"t=$(mktemp -d) && dnf -q --setopt=cachedir=\"$t\" --repofrompath=gpunode-nvidia,"
                f"{base} --repo=gpunode-nvidia --setopt=gpunode-nvidia.module_hotfixes=1 repoquery --qf '%{{name}}' "
                f"{q(pattern)} 2>/dev/null; rm -rf \"$t\""}

    def _choose_el_build(self, ctx: StepContext, pkgs: DriverPackages, why: str,
                         installed: dict[str, str]) -> tuple[DriverPackages, str]:
        """EL: NVIDIA's precompiled stream nvidia-driver:<branch> when it has a kmod for the target kernel, the
        -dkms stream otherwise; a host whose driver is the DKMS build stays so."""
        if not self._el_precompiled(ctx.facts) or pkgs.packages[-1] in installed:
            return pkgs, why
        target = ctx.target_kernel
        kmods = self._el_kmods(set(installed), target) or self._el_kmods(ctx.probe["precompiled"].split(), target)
        stream = value(EL, "precompiled_stream").format(branch=self.branch)
        if kmods:
            return for_os(ctx.facts.os).kmod_packages(self.branch, kmods[0]), \
                f"{why}; NVIDIA's precompiled stream nvidia-driver:{stream} has {kmods[0]} for kernel {target}"
        return pkgs, f"{why}; NVIDIA's precompiled stream nvidia-driver:{stream} has no kmod for kernel {target}: " \
            f"DKMS ({pkgs.module_stream})"

    def _choose_build(self, ctx: StepContext, pkgs: DriverPackages, flavor: str, why: str,
                      installed: dict[str, str]) -> tuple[DriverPackages, str]:
        """An archive with precompiled modules: those for the target kernel when the archive has them, DKMS
        otherwise (the order of the distro's own driver detection); a host whose driver is the DKMS build stays so.
        (packages, reason)"""
        if self._rpm_dkms(ctx.facts):
            return self._choose_el_build(ctx, pkgs, why, installed)
        if not self._archive_precompiled(ctx.facts) or pkgs.packages[0] in installed:
            return pkgs, why
        target = ctx.target_kernel
        distro = for_os(ctx.facts.os)
        precompiled = distro.archive_precompiled_packages(self.branch, flavor, target)
        modules = distro.modules_package(precompiled)
        offered = set(ctx.probe["precompiled"].split())
        if modules in installed or modules in offered:
            return precompiled, f"{why}; Canonical's signed precompiled modules for kernel {target} ({modules})"
        return pkgs, f"{why}; no precompiled modules for kernel {target} in the archive ({modules}): DKMS build"

    def plan(self, ctx: StepContext) -> list[Action]:
        kept = verify_only(ctx, "NVIDIA driver", "nvidia-smi --query-gpu=index,name,driver_version --format=csv,"
                           "noheader", "cloud_driver") if self.cloud_driver == "keep" else []
        if kept:
            return kept
        facts = ctx.facts
        pkgs, flavor, why = self._packages(facts)
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(ctx.probe.within("pkgs")).installed
        pkgs, why = self._choose_build(ctx, pkgs, flavor, why, installed)
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
        actions: list[Action] = left_pause_actions(sections["no_autoinstall"]) + leftover + \
            repair_first(ctx, manager, self.timeout, removed)
        actions += sources_actions(sections["apt_sources"], distro.driver_components(self.method),
                                   distro.is_archive_entry, distro.driver_components_reason)
        actions += self._nouveau_actions(ctx) + self._dkms_jobs_actions(ctx, flavor, pkgs)
        switch = self._rpm_switch(pkgs, installed)
        update = self._update(pkgs, installed)
        missing = self._missing(facts, pkgs, installed, switch)
        lifted = update_holds([*pkgs.pinned], facts, held) if update else []  # let go of first, held again after
        if update:
            held, why = held - set(lifted), f"{update}; {why}"
        if missing:
            actions.append(self._cached_install(ctx, manager, pkgs, flavor, why, missing, held, switch))
        if self.method == "runfile":
            actions += self._runfile_actions(facts, manager, installed, flavor, target, sections["unit"])
        driver_version = upstream_version(installed[pkgs.version_from]) \
            if pkgs.version_from in installed and not switch else None
        if pkgs.packages and pkgs.dkms_module and not missing:
            module = for_os(facts.os).dkms_module_name(self.method, flavor, driver_version)
            actions += self._dkms_actions(ctx, module, driver_version, flavor)
            actions += self._next_boot_actions(ctx, module, driver_version, flavor)
        fm = pkgs.fabricmanager if wants_fm else ()
        actions += self._fabricmanager_actions(manager, pkgs, fm, installed, driver_version)
        installing = bool(missing) or self._runfile_installs(facts)
        actions += self._keep_actions(ctx, manager, [*pkgs.pinned, *fm], held, bool(switch), installing)
        actions = self._unhold_first(actions, manager, lifted)
        return actions + self._ready_actions(ctx, installing, wants_fm) + self._initramfs_actions(ctx, actions)

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
        install = self._install_action(ctx, manager, pkgs, flavor, why, missing, held, switch)
        use = self._cache_use(ctx.facts) and bool(pkgs.dkms_module)
        candidate = ctx.probe["candidate"].strip()
        version = candidate.splitlines()[-1] if candidate else ""
        return cached_install(install, use, pkgs.version_from, flavor,
                              distro.driver_version_probe(pkgs, self.branch) if distro.module_cache_before_install
                              else None, version=version,
                              outlook=self._module_outlook(ctx, flavor, version) if use else "")

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
                if self._archive_precompiled(facts) else ""
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

    def _dkms_jobs_actions(self, ctx: StepContext, flavor: str, pkgs: DriverPackages) -> list[Action]:
        """RPM: NVIDIA's proprietary DKMS package builds with two jobs; DKMS takes MAKE[0] from /etc/dkms/nvidia.conf
        instead, with all cores (as the ECS and EKS GPU AMIs do). The open package runs `make -j` already: a file of
        ours left from the proprietary flavour (it names the proprietary make target) is removed."""
        if not self._rpm_dkms(ctx.facts) or not pkgs.dkms_module:
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

    def _cache_use(self, facts: Facts) -> bool:
        """The module cache is used: asked for and a packaged driver. On apt the driver packages go in with Debian's
        autoinstall paused (/etc/dkms/no-autoinstall), on RPM the cached tree goes in first, since the kmod
        package's %post builds at once (gpunode/distros/rpm.py, EL `kmod_post`)."""
        return cache_store(self.module_cache) is not None and self.method != "runfile"

    def _module_outlook(self, ctx: StepContext, flavor: str, version: str) -> str:
        """Check mode with the module cache: what this host does for the kernel module, said in the install's
        summary: build it for its group (the first host of the group to plan), wait for that host's build, or install
        the cached entry (the group's key from the version the package lists offer now). "" when applying."""
        if not ctx.check:
            return ""
        if not version:
            return ("from the module cache if its group's entry is there, else built by the group's first host; its "
                    "version is not known before the install")
        module = for_os(ctx.facts.os).dkms_module_name(self.method, flavor, version)
        return plan_module(ctx, module, version, ctx.target_kernel, cache=self.module_cache, flavour=flavor,
                           timeout=self.timeout).summary

    def _next_boot_actions(self, ctx: StepContext, module: str, version: str | None, flavor: str) -> list[Action]:
        """The module for the kernel the bootloader boots next when that is not the target (a kernel an unattended
        upgrade installed after the driver): built there too, its headers installed first when missing, so that
        the reboot into it keeps the GPUs."""
        kernel = ctx.facts.kernel
        following = kernel.next_boot
        if following in (ctx.target_kernel, kernel.running) or ctx.state.target_kernel_unknown:
            return []
        if following in kernel.headers:
            return self._dkms_actions(ctx, module, version, flavor, following,
                                      why=f"the bootloader boots kernel {following} next (the newest installed)")
        if dkms_installed(parse_dkms(ctx.probe["dkms"]), (module,), following):
            return []
        manager = manager_for(ctx.facts.os.package_manager)
        headers = for_os(ctx.facts.os).headers_packages(following, kernel.package)
        install = manager.install([Wanted(name) for name in headers], refresh=True, recommends=False)
        return [Action(
            f"install {', '.join(headers)} and build the {module} DKMS module for kernel {following}",
            f"the bootloader boots kernel {following} next (the newest installed), and it has neither headers nor "
            "the module: after a reboot the GPUs would be gone",
            _with_build_errors(f"{install} && dkms autoinstall -k {q(following)} && "
                               f"{{ {installed_check(f'-k {q(following)}', q(following))}; }}"),
            timeout=self.timeout, installs=tuple(headers),
            fix=f"the headers of kernel {following} must exist in the repositories; else remove that kernel or make "
            "the bootloader boot the running one")]

    def _dkms_actions(self, ctx: StepContext, module: str, version: str | None = None,
                      flavor: str = "", kernel: str = "", why: str = "") -> list[Action]:
        """Build the driver's DKMS module for the target kernel (or `kernel`, for the reason `why`) when `dkms status`
        lists no build of it (through the module cache when it is on)."""
        target = kernel or ctx.target_kernel
        entries = parse_dkms(ctx.probe["dkms"])
        if dkms_installed(entries, (module,), target):
            return []
        if version and self._cache_use(ctx.facts):
            return [plan_module(ctx, module, version, target, cache=self.module_cache, flavour=flavor,
                                timeout=self.timeout)]
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
            _with_build_errors(f"{undo}dkms autoinstall -k {q(target)} && "
                               f"{{ {installed_check(f'-k {q(target)}', q(target))}; }}"),
            timeout=self.timeout,
            fix=f"headers for {target} must be installed, and space for the module in /lib/modules/{target}; see "
            f"/var/lib/dkms/{module}/*/build/make.log")]

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        """As every step, except the module cache's actions (gpunode/steps/module_cache.py)."""
        for action in actions:
            if isinstance(action, ModuleAction):
                ctx.notes.append(f"{action.key.label if action.key else 'nvidia'}: {apply_module(ctx, action)}")
                continue
            if isinstance(action, CachedInstall) and action.version_probe is not None:
                self._install_around_cache(ctx, action)
                continue
            super().apply(ctx, [action])
            if isinstance(action, CachedInstall):
                self._module_after_install(ctx, action)

    def _install_around_cache(self, ctx: StepContext, action: CachedInstall) -> None:
        """RPM: the version the install brings asked first (NVIDIA's repository, nothing changes), the cached build
        of that version for the target kernel placed, then the packages (their %post finds the module built); the
        first host of a group lets the %post build, and its build is published. When the version cannot be told
        first, or the install brings another, the module comes afterwards as on apt."""
        version = action.version  # asked in the probe (the same query), else now
        if not version and action.version_probe:
            read = ctx.run(action.version_probe, label="the driver version to install")
            version = read.stdout.strip().splitlines()[-1] if read.ok and read.stdout.strip() else ""
        manager = manager_for(ctx.facts.os.package_manager)

        def install() -> bool:
            Step.apply(self, ctx, [action])
            got = ctx.run(manager.version_of(action.version_from), label="driver version")
            return got.ok and got.stdout.strip() == version

        if version:
            module = for_os(ctx.facts.os).dkms_module_name(self.method, action.flavor, version)
            planned = plan_module(ctx, module, version, ctx.target_kernel, cache=self.module_cache,
                                  flavour=action.flavor, timeout=self.timeout)
            done = apply_around(ctx, planned, install)
            if done:
                ctx.notes.append(f"{planned.key.label if planned.key else module}: {done}")
                return
        else:
            ctx.notes.append("the driver version could not be read from NVIDIA's repository before the install: "
                             "the kmod package's %post builds the module here")
            super().apply(ctx, [action])
        self._module_after_install(ctx, action)

    def _module_after_install(self, ctx: StepContext, action: CachedInstall) -> None:
        """The packages went in with DKMS's autoinstall off: the module for the target kernel from the cache (or
        built here and published), its version read from the installed driver package."""
        manager = manager_for(ctx.facts.os.package_manager)
        read = ctx.run(manager.version_of(action.version_from), label="driver version")
        version = read.stdout.strip() if read.ok else ""
        if not version:
            raise StepFailed(f"the driver packages were installed, but {action.version_from}'s version cannot be read",
                             fix="run again: the next run builds the module with DKMS (dkms autoinstall)")
        module = for_os(ctx.facts.os).dkms_module_name(self.method, action.flavor, version)
        planned = plan_module(ctx, module, version, ctx.target_kernel, cache=self.module_cache,
                              flavour=action.flavor, timeout=self.timeout)
        ctx.notes.append(f"{planned.key.label if planned.key else module}: {apply_module(ctx, planned)}")

    @staticmethod
    def _nouveau_actions(ctx: StepContext) -> list[Action]:
        """Nouveau blacklisted and the initramfs rebuilt; a reboot when nouveau is loaded now."""
        nouveau = parse_file_probe(ctx.probe["nouveau"])
        if nouveau.content == NOUVEAU_CONTENT:
            return []
        write = write_action(NOUVEAU_CONF, nouveau, NOUVEAU_CONTENT, reason="nouveau must not claim the GPU")
        write.summary = f"blacklist nouveau ({NOUVEAU_CONF})"
        if ctx.facts.nvidia.nouveau_loaded:
            ctx.require_reboot("nouveau is loaded and now blacklisted")
        return [write]

    @staticmethod
    def _initramfs_actions(ctx: StepContext, actions: list[Action]) -> list[Action]:
        """The initramfs images made before the nouveau blacklist rebuilt, after the packages (whose own install
        usually regenerates the newest kernel's image with the blacklist in it): when the blacklist is written now,
        or the probe found images older than it (a run stopped between the two)."""
        stale = ctx.probe["initramfs"].split()
        writing = any(a.summary.startswith(f"blacklist nouveau ({NOUVEAU_CONF})") for a in actions)
        if not writing and not stale:
            return []
        which = f" (kernels {', '.join(sorted(set(stale)))})" if stale else ""
        return [Action(f"rebuild the initramfs images older than the nouveau blacklist{which}",
                       "the initramfs loads modules before the root file system: nouveau must be blacklisted in it "
                       "too; an image the package install regenerated already has it", REBUILD_STALE_INITRAMFS,
                       timeout=900,
                       fix="see the update-initramfs / dracut output above; /boot must have room for the new images")]

    def _rpm_switch(self, pkgs: DriverPackages, installed: dict[str, str]) -> str:
        """Why NVIDIA's dnf module must switch streams ("" when it need not): the installed driver is of another
        branch, or its kernel module package is the other flavour's (kmod-nvidia-latest-dkms vs -open-dkms)."""
        have = installed.get(pkgs.version_from)
        if not pkgs.module_stream or have is None:
            return ""
        version = upstream_version(have)
        if not version.startswith(f"{self.branch}."):
            return f"driver {version} is installed, branch {self.branch} is wanted"
        kmod = pkgs.packages[-1]
        return "" if kmod in installed else \
            f"driver {version} is installed without {kmod} (the other module flavour's stream, or cut off)"

    def _update(self, pkgs: DriverPackages, installed: dict[str, str]) -> str:
        """Why the installed driver is updated within its branch ("" when it is not): `version` asks for another."""
        have = installed.get(pkgs.version_from)
        if not self.version or have is None or upstream_version(have) == self.version:
            return ""
        return f"driver {upstream_version(have)} is installed, version {self.version} is asked for"

    @staticmethod
    def _unhold_first(actions: list[Action], manager: PackageManager, holds: list[str]) -> list[Action]:
        """An update within the branch: the held driver packages and kin let go of before the install."""
        if not holds:
            return actions
        return [Action(f"let go of the driver's holds for the update: {', '.join(holds)}",
                       "apt and dnf refuse to change a held package; the hold is put back after the install",
                       manager.unhold(holds)), *actions]

    def _missing(self, facts: Facts, pkgs: DriverPackages, installed: dict[str, str], switch: str) -> list[Wanted]:
        """The driver packages to install (all of them when the module stream switches)."""
        pin = (f"{self.version}*" if self.version else None) or for_os(facts.os).driver_pin(self.method, self.branch) \
            or (f"{pkgs.version}*" if pkgs.version else None)
        wanted = [Wanted(p, pin if p in pkgs.pinned and not p.startswith("kmod-") else None) for p in pkgs.packages]
        return wanted if switch else [w for w in wanted if not w.satisfied_by(installed.get(w.name))]

    def _install_action(self, ctx: StepContext, manager: PackageManager, pkgs: DriverPackages, flavor: str,
                        why: str, missing: list[Wanted], held: set[str], switch: str) -> Action:
        """One command: held packages in the way let go, repositories, the module stream (switched NVIDIA's way
        when the branch or flavour changes), the packages."""
        facts, target = ctx.facts, ctx.target_kernel
        stale = self._stale_holds(facts, pkgs, flavor, held, switch)
        setup = pkgs.module_switch() if switch else pkgs.repo_setup
        if setup and CUDA_KEYRING in setup:  # cuda-repo on apt: the keyring package is fetched with curl
            setup = f"{{ [ -e {CUDA_KEYRING} ] || {curl_first(facts, manager)}; }} && {{ {setup}; }}"
        repos = _dkms_repos(facts, manager) if pkgs.dkms_module else ""  # precompiled modules need no dkms
        steps = [manager.unhold(stale) if stale else "", repos, setup]
        setup = " && ".join(x for x in steps if x)
        install = manager.install(missing, refresh=True, recommends=False, downgrades=bool(self.version))
        reason = f"{why}; building for kernel {_kernel_to_run(ctx)}" if pkgs.dkms_module else \
            f"{why}; for kernel {_kernel_to_run(ctx)}"
        if switch or stale:
            reason = f"{switch or 'held packages of another branch or flavour are in the way: ' + ', '.join(stale)}; " \
                f"{reason}"
        return Action(
            f"install the NVIDIA {self.branch} driver ({flavor} modules): {', '.join(w.name for w in missing)}",
            reason, _with_build_errors(f"{setup} && {{ {install}; }}" if setup else install), timeout=self.timeout,
            installs=tuple(AptManager.specs(missing)),
            fix="read the DKMS build log (/var/lib/dkms/*/*/build/make.log) and check that the headers for "
            f"{target} are installed")

    def _stale_holds(self, facts: Facts, pkgs: DriverPackages, flavor: str, held: set[str], switch: str) -> list[str]:
        """Held packages that would block this install: on apt another branch's or flavour's packages; on dnf, when
        the stream switches, the version locks of the driver and fabric manager packages."""
        distro = for_os(facts.os)
        if distro.package_format == "deb":
            other = set(distro.other_driver_packages(self.method, self.branch, flavor, held))
            if distro.archive_precompiled(self.method):
                other |= {n for n in held if n not in pkgs.packages and distro.is_precompiled_package(n)}
            # another branch's driver: its held kin (nvidia-modprobe...) would keep the new branch's from installing
            return sorted(other | ({n for n in kin_installed(facts) if n in held} if other else set()))
        if not switch:
            return []
        ours = set(pkgs.pinned) | set(distro.fabricmanager_packages(self.method, self.branch)) | \
            set(kin_installed(facts))
        return sorted(n for n in held if n in ours or n.startswith(("nvidia-fabric", "libnvidia-nscq")))

    def _ready_actions(self, ctx: StepContext, installing: bool, wants_fm: bool) -> list[Action]:
        """Leave the host ready when the run ends. A loaded driver that this run replaces stays loaded until a
        reboot (the new one cannot load beside it): reboot, as NVIDIA's role does after an install. On NVSwitch hosts
        CUDA needs the fabric manager running: with no reboot ahead, load the module and start nvidia-persistenced
        and the fabric manager, in gpu-driver-container's order (modprobe nvidia, then the daemons); with a reboot
        ahead the enabled units start at boot."""
        loaded = ctx.facts.nvidia.driver_version
        if installing and loaded:
            ctx.require_reboot(f"the loaded driver {loaded} is replaced; the new one loads at the next boot")
        if not wants_fm or ctx.reboot_required:
            return []
        nvidia = ctx.facts.nvidia
        states = ((value(NVIDIA, "persistenced_unit"), nvidia.persistenced_active, self.persistenced),
                  (value(NVIDIA, "fabricmanager_unit"), nvidia.fabricmanager_active, True))
        units = [unit for unit, active, wanted in states if wanted and (installing or active is False)]
        if not units:
            return []
        return [Action(f"load the driver and start {', '.join(units)}",
                       "NVSwitch host: CUDA fails until the fabric manager runs; no reboot is planned to start it",
                       f"modprobe nvidia && systemctl start {' '.join(units)}", timeout=300,
                       fix="see `journalctl -u nvidia-fabricmanager` and `dmesg | grep -i nvrm` on the host: the "
                       "fabric manager must be the driver's exact version")]

    def _runfile_installs(self, facts: Facts) -> bool:
        """Method runfile and the loaded driver is not of the branch: the runfile runs."""
        loaded = facts.nvidia.driver_version or ""
        return self.method == "runfile" and not loaded.startswith(f"{self.branch}.")

    def _runfile_actions(self, facts: Facts, manager: PackageManager, installed: dict[str, str], flavor: str,
                         target: str, unit_probe: str) -> list[Action]:
        """Build tools first, the runfile with an explicit module type, a unit for nvidia-persistenced."""
        actions = []
        tools = [Wanted(t) for t in RUNFILE_BUILD_TOOLS if t not in installed]
        if tools:
            setup = _dkms_repos(facts, manager)
            install = manager.install(tools, refresh=True, recommends=False)
            actions.append(Action(f"install the driver's build tools: {', '.join(w.name for w in tools)}",
                                  "the runfile compiles the kernel module with DKMS",
                                  f"{setup} && {{ {install}; }}" if setup else install, timeout=self.timeout))
        if self._runfile_installs(facts):
            source = self.runfile or ""
            fetch = f"{curl_first(facts, manager)} && curl -fsSL -o /tmp/nvidia.run {q(source)}" \
                if "://" in source else f"cp {q(source)} /tmp/nvidia.run"
            module = "kernel-open" if flavor == "open" else "kernel"  # the runfile's default changed in 560
            extra, why = _runfile_nouveau_options(facts)
            actions.append(Action(
                f"install the driver from {source} ({flavor} modules)", f"method: runfile{why}",
                f"{fetch} && sh /tmp/nvidia.run --dkms --silent -m={module}{extra} -k {q(target)}; rc=$?; "
                "rm -f /tmp/nvidia.run; exit $rc", timeout=self.timeout,
                fix="see /var/log/nvidia-installer.log on the host"))
        if self.persistenced:
            unit = parse_file_probe(unit_probe)
            if unit.content != PERSISTENCED_CONTENT:
                actions.append(write_action(PERSISTENCED_UNIT, unit, PERSISTENCED_CONTENT,
                                            reason="the runfile installs no unit for nvidia-persistenced"))
        return actions

    def _fabricmanager_actions(self, manager: PackageManager, pkgs: DriverPackages, fm: tuple[str, ...],
                               installed: dict[str, str], driver_version: str | None) -> list[Action]:
        """Fabric manager + NSCQ at exactly the driver's version (read on the host: on a first run the driver is
        installed by the action before), then `systemctl enable`."""
        if not fm:
            return []
        have = {p: upstream_version(installed[p]) for p in fm if p in installed}
        if driver_version and len(have) == len(fm) and set(have.values()) == {driver_version}:
            return []
        version = f"v=$({manager.version_of(pkgs.version_from)}) && [ -n \"$v\" ] && "
        return [Action(f"install and enable {', '.join(fm)} at the driver's version ({driver_version or 'new'})",
                       "NVSwitch devices present: CUDA fails without a fabric manager of the same version",
                       f"{version}{{ {manager.install_at(list(fm), 'v')}; }} && systemctl enable nvidia-fabricmanager",
                       timeout=self.timeout, fix="the fabric manager of exactly the driver's version must exist in "
                       "the repository")]


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


def _runfile_nouveau_options(facts: Facts) -> tuple[str, str]:
    """With nouveau loaded, nvidia-installer's silent mode answers ABORT to its nouveau check: the installer's own
    options skip the check and the module test load (which nouveau would fail); the blacklist written before and the
    reboot planned for nouveau make the new module load. (options, what to add to the reason)"""
    if not facts.nvidia.nouveau_loaded:
        return "", ""
    options = f" {value(NVIDIA, 'runfile_no_nouveau_check')} {value(NVIDIA, 'runfile_skip_module_load')}"
    return options, "; nouveau is loaded: the installer's nouveau check and test load are skipped, the reboot " \
        "planned for nouveau loads the new module"


def _dkms_repos(facts: Facts, manager: PackageManager) -> str:
    """The repositories dkms comes from (EPEL + CodeReady Builder on EL); none when dkms is already installed."""
    if "dkms" in facts.installed_packages:
        return ""
    try:
        return for_os(facts.os).extra_repos(facts.pkg)
    except UnsupportedDistro as exc:
        raise StepFailed(str(exc), fix=exc.fix) from None
def _kernel_to_run(ctx: StepContext) -> str:
    """The kernel the driver is built for, as a reason names it (check mode: it may be known only in the run)."""
    if ctx.state.target_kernel_unknown:
        return "the kernel that will run (unknown until run: an earlier step may install a new one)"
    return ctx.target_kernel


def _with_build_errors(command: str) -> str:
    """`command`, and when it fails, the compiler's errors from the DKMS build logs on stderr (so the failure
    message names the cause, e.g. a kernel API the driver source does not know yet)."""
    return (f"{{ {command}; }} || {{ rc=$?; grep -h -m 5 -e ' error: ' -e '^Error!' "
            "/var/lib/dkms/*/*/build/make.log >&2 2>/dev/null; exit $rc; }")

