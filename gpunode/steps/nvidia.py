"""`nvidia_driver`: the driver for the kernel that will run, nouveau out of the way, packages held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.facts.packages import dkms_installed, parse_dkms, upstream_version
from gpunode.gpu.distro import (
    DriverPackages,
    UnsupportedDistro,
    check_supported,
    dkms_module_name,
    driver_packages,
)
from gpunode.gpu.modules import choose_kernel_modules
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register
from gpunode.steps.pkgmgr import PackageManager, Wanted, manager_for
from gpunode.steps.probe import Snippets, nested
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_CONTENT = "# Written by gpunode: the NVIDIA driver cannot load while nouveau holds the GPU.\n" \
                  "blacklist nouveau\noptions nouveau modeset=0\n"
REBUILD_INITRAMFS = ("if command -v update-initramfs >/dev/null; then update-initramfs -u -k all; "
                     "elif command -v dracut >/dev/null; then dracut -f --regenerate-all; fi")
# Debian ships one driver version per release; other branches come from NVIDIA's repository.
DEBIAN_BRANCH = {"11": 470, "12": 535, "13": 550}
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


@register
@dataclass
class NvidiaDriverStep(Step):
    """Install the NVIDIA driver (distro packages, NVIDIA's CUDA repo, or a runfile) for the target kernel."""

    kind = "nvidia_driver"
    facts_sections = frozenset({"pkgmgr", "packages", "services", "gpu"})
    method: Literal["distro", "cuda-repo", "runfile"] = "distro"
    branch: int = 535
    kernel_modules: Literal["auto", "open", "proprietary"] = "auto"
    runfile: str | None = None
    fabricmanager: Literal["auto", "yes", "no"] = "auto"
    hold: bool = True
    persistenced: bool = True
    allow_secure_boot: bool = False
    timeout: int = 3600

    def __post_init__(self) -> None:
        if self.method == "runfile" and not self.runfile:
            raise ValueError("nvidia_driver.runfile (a URL or a path on the host) is required with method: runfile")

    def _packages(self, facts: Facts) -> tuple[DriverPackages, str, str]:
        try:
            check_supported(facts.os)
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix="provision a supported distribution (see the README's distro table)") \
                from None
        flavor, why = choose_kernel_modules([g.device_id for g in facts.gpus if not g.is_nvswitch], self.branch,
                                            self.kernel_modules)
        if self.method == "runfile":
            return DriverPackages((), (), "nvidia", ()), flavor, why
        if self.method == "distro" and facts.os.id == "debian":
            shipped = DEBIAN_BRANCH.get(facts.os.version_id)
            if shipped != self.branch:
                raise StepFailed(f"Debian {facts.os.version_id} ships driver branch {shipped}, not {self.branch}",
                                 fix=f"set driver_branch: {shipped}, or method: cuda-repo for other branches")
        try:
            return driver_packages(facts.os, self.method, self.branch, flavor), flavor, why
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix="choose another method (cuda-repo or runfile)") from None

    def _wants_fabricmanager(self, facts: Facts) -> bool:
        return self.fabricmanager == "yes" or (self.fabricmanager == "auto" and facts.nvswitch_present)

    def probe(self, facts: Facts) -> Snippets:
        pkgs, _, _ = self._packages(facts)
        manager = manager_for(facts.os.package_manager)
        snippets = {"nouveau": probe_file(NOUVEAU_CONF), "dkms": "dkms status 2>/dev/null",
                    "held": manager.held_probe(),
                    "persistenced": "systemctl is-enabled nvidia-persistenced 2>/dev/null"}
        names = list(pkgs.packages) + list(pkgs.fabricmanager if self._wants_fabricmanager(facts) else ())
        if self.method == "runfile":
            names += RUNFILE_BUILD_TOOLS
            snippets["unit"] = probe_file(PERSISTENCED_UNIT)
        if names:
            snippets.update(nested("pkgs", manager.probe(names)))
        return snippets

    def plan(self, ctx: StepContext) -> list[Action]:
        facts = ctx.facts
        if facts.secure_boot and not self.allow_secure_boot:
            raise StepFailed(
                "Secure Boot is enabled: an unsigned DKMS-built nvidia module will not load",
                fix="enrol a Machine Owner Key for DKMS (mokutil --import /var/lib/dkms/mok.pub, then confirm at "
                "the console on reboot), use signed precompiled packages (Ubuntu linux-modules-nvidia-*), disable "
                "Secure Boot, or set allow_secure_boot: true if the key is already enrolled",
            )
        pkgs, flavor, why = self._packages(facts)
        wants_fm = self._wants_fabricmanager(facts)
        if wants_fm and not pkgs.fabricmanager:
            raise StepFailed(f"NVSwitches are present, but {facts.os.pretty_name or facts.os.id} has no fabric "
                             f"manager package for method {self.method}; CUDA fails without one",
                             fix="use method: cuda-repo (NVIDIA's repository has nvidia-fabricmanager), or "
                             "fabricmanager: no if the fabric manager is installed by other means")
        sections = ctx.probe
        target = ctx.target_kernel
        shown = _kernel_to_run(ctx)
        actions: list[Action] = []
        nouveau = parse_file_probe(sections["nouveau"])
        if nouveau.content != NOUVEAU_CONTENT:
            write = write_action(NOUVEAU_CONF, nouveau, NOUVEAU_CONTENT, reason="nouveau must not claim the GPU")
            write.summary = f"blacklist nouveau ({NOUVEAU_CONF}) and rebuild the initramfs"
            write.command = f"{write.command} && {{ {REBUILD_INITRAMFS}; }}"
            actions.append(write)
            if facts.nvidia.nouveau_loaded:
                ctx.require_reboot("nouveau is loaded and now blacklisted")
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(sections.within("pkgs")).installed
        pinned = set(pkgs.pinned)
        debian_pin = self.method == "distro" and facts.os.id == "debian"
        wanted = [Wanted(p, f"{self.branch}.*" if p in pinned and debian_pin else None) for p in pkgs.packages]
        missing = [w for w in wanted if not w.satisfied_by(installed.get(w.name))]
        if missing:
            setup = " && ".join(x for x in (manager.extra_repos(facts.os), pkgs.repo_setup) if x)
            install = manager.install(missing, refresh=True, recommends=False)
            actions.append(Action(
                f"install the NVIDIA {self.branch} driver ({flavor} modules): {', '.join(w.name for w in missing)}",
                f"{why}; building for kernel {shown}",
                _with_build_errors(f"{setup} && {{ {install}; }}" if setup else install),
                timeout=self.timeout,
                fix="read the DKMS build log (/var/lib/dkms/*/*/build/make.log) and check that the headers for "
                f"{target} are installed",
            ))
        if self.method == "runfile":
            actions += self._runfile_actions(facts, manager, installed, flavor, target, sections["unit"])
        driver_version = upstream_version(installed[pkgs.version_from]) if pkgs.version_from in installed else None
        module = dkms_module_name(facts.os, self.method, flavor, driver_version)
        if pkgs.packages and not missing and not dkms_installed(parse_dkms(sections["dkms"]), (module,), target):
            actions.append(Action(
                f"build the {module} DKMS module for kernel {target}", "dkms status shows no build for it",
                _with_build_errors(f"dkms autoinstall -k {q(target)} && dkms status -k {q(target)} | "
                                   "grep -q ': installed'"),
                timeout=self.timeout,
                fix=f"headers for {target} must be installed; see /var/lib/dkms/{module}/*/build/make.log",
            ))
        fm = pkgs.fabricmanager if wants_fm else ()
        actions += self._fabricmanager_actions(manager, pkgs, fm, installed, driver_version)
        if self.hold and (pkgs.pinned or fm):
            held = manager.parse_held(sections["held"])
            unheld = [p for p in (*pkgs.pinned, *fm) if p not in held]
            if unheld:
                actions.append(Action(f"hold {', '.join(unheld)}",
                                      "unattended upgrades must not cause a driver/library version mismatch",
                                      manager.hold(unheld)))
        if self.persistenced and sections["persistenced"].strip() not in ("enabled", "static"):
            actions.append(Action("enable nvidia-persistenced", "keeps the GPUs initialised between jobs",
                                  "systemctl enable nvidia-persistenced",
                                  fix="the driver packages provide the unit; check that they installed"))
        return actions

    def _runfile_actions(self, facts: Facts, manager: PackageManager, installed: dict[str, str], flavor: str,
                         target: str, unit_probe: str) -> list[Action]:
        """Build tools first, the runfile with an explicit module type, a unit for nvidia-persistenced."""
        actions = []
        tools = [Wanted(t) for t in RUNFILE_BUILD_TOOLS if t not in installed]
        if tools:
            setup = manager.extra_repos(facts.os)
            install = manager.install(tools, refresh=True, recommends=False)
            actions.append(Action(f"install the driver's build tools: {', '.join(w.name for w in tools)}",
                                  "the runfile compiles the kernel module with DKMS",
                                  f"{setup} && {{ {install}; }}" if setup else install, timeout=self.timeout))
        if not (facts.nvidia.driver_version and facts.nvidia.driver_version.startswith(f"{self.branch}.")):
            source = self.runfile or ""
            fetch = f"curl -fsSL -o /tmp/nvidia.run {q(source)}" if "://" in source else \
                f"cp {q(source)} /tmp/nvidia.run"
            module = "kernel-open" if flavor == "open" else "kernel"  # the runfile's default changed in 560
            actions.append(Action(
                f"install the driver from {source} ({flavor} modules)", "method: runfile",
                f"{fetch} && sh /tmp/nvidia.run --dkms --silent -m={module} -k {q(target)}; rc=$?; "
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

