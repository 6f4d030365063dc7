"""`nvidia_driver`: the driver for the kernel that will run, nouveau out of the way, packages held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import join, q
from gpunode.facts import Facts
from gpunode.gpu.distro import DriverPackages, UnsupportedDistro, driver_packages
from gpunode.gpu.modules import choose_kernel_modules
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register
from gpunode.steps.pkgmgr import Wanted, manager_for
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_CONTENT = "# Written by gpunode: the NVIDIA driver cannot load while nouveau holds the GPU.\n" \
                  "blacklist nouveau\noptions nouveau modeset=0\n"
REBUILD_INITRAMFS = ("if command -v update-initramfs >/dev/null; then update-initramfs -u -k all; "
                     "elif command -v dracut >/dev/null; then dracut -f --regenerate-all; fi")
# Debian ships one driver version per release; other branches come from NVIDIA's repository.
DEBIAN_BRANCH = {"11": 470, "12": 535}


@register
@dataclass
class NvidiaDriverStep(Step):
    """Install the NVIDIA driver (distro packages, NVIDIA's CUDA repo, or a runfile) for the target kernel."""

    kind = "nvidia_driver"
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

    def probe(self, facts: Facts) -> str:
        pkgs, _, _ = self._packages(facts)
        parts = [probe_file(NOUVEAU_CONF), "echo @@dkms; dkms status 2>/dev/null", "echo @@held; "
                 "apt-mark showhold 2>/dev/null || dnf -q versionlock list 2>/dev/null",
                 "echo @@persistenced; systemctl is-enabled nvidia-persistenced 2>/dev/null"]
        if pkgs.packages:
            parts.append("echo @@pkgs; " + manager_for(facts.os.package_manager).probe(list(pkgs.packages)))
        return "; ".join(parts)

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
        sections = _sections(ctx.probe_output)
        target = ctx.target_kernel
        actions: list[Action] = []
        nouveau = parse_file_probe(sections.get("", ""))
        if nouveau.content != NOUVEAU_CONTENT:
            write = write_action(NOUVEAU_CONF, nouveau, NOUVEAU_CONTENT, reason="nouveau must not claim the GPU")
            write.summary = f"blacklist nouveau ({NOUVEAU_CONF}) and rebuild the initramfs"
            write.command = f"{write.command} && {{ {REBUILD_INITRAMFS}; }}"
            actions.append(write)
            if facts.nvidia.nouveau_loaded:
                ctx.require_reboot("nouveau is loaded and now blacklisted")
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(sections.get("pkgs", "")).installed if pkgs.packages else {}
        version_glob = f"{self.branch}.*"
        pinned = set(pkgs.pinned)
        wanted = [Wanted(p, version_glob if (p in pinned and self.method == "distro" and facts.os.id == "debian")
                         else None) for p in pkgs.packages]
        missing = [w for w in wanted if not w.satisfied_by(installed.get(w.name))]
        if missing:
            install = manager.install(missing, refresh=True, recommends=False)
            command = f"{pkgs.repo_setup} && {install}" if pkgs.repo_setup else install
            actions.append(Action(
                f"install the NVIDIA {self.branch} driver ({flavor} modules): {', '.join(w.name for w in missing)}",
                f"{why}; building for kernel {target}", command, timeout=self.timeout,
                fix="read the DKMS build log (/var/lib/dkms/*/*/build/make.log) and check that the headers for "
                f"{target} are installed",
            ))
        if self.method == "runfile":
            actions += self._runfile_actions(facts, flavor, target)
        if not _dkms_installed(sections.get("dkms", ""), pkgs.dkms_module, target) and (missing or installed):
            actions.append(Action(
                f"build the {pkgs.dkms_module} DKMS module for kernel {target}", "dkms status shows no build for it",
                f"dkms autoinstall -k {q(target)} && dkms status -k {q(target)} | grep -q ': installed'",
                timeout=self.timeout,
                fix=f"headers for {target} must be installed; see /var/lib/dkms/{pkgs.dkms_module}/*/build/make.log",
            ))
        if self.hold and pkgs.pinned:
            held = sections.get("held", "").split()
            unheld = [p for p in pkgs.pinned if p not in held]
            if unheld:
                hold = f"apt-mark hold {join(unheld)}" if facts.os.family == "debian" else \
                    f"(rpm -q python3-dnf-plugin-versionlock || dnf -y install python3-dnf-plugin-versionlock) " \
                    f"&& dnf versionlock add {join(unheld)}"
                actions.append(Action(f"hold {', '.join(unheld)}",
                                      "unattended upgrades must not cause a driver/library version mismatch", hold))
        if self.persistenced and sections.get("persistenced", "").strip() not in ("enabled", "static"):
            actions.append(Action("enable nvidia-persistenced", "keeps the GPUs initialised between jobs",
                                  "systemctl enable nvidia-persistenced || true"))
        actions += self._fabricmanager_actions(ctx, pkgs, installed)
        return actions

    def _runfile_actions(self, facts: Facts, flavor: str, target: str) -> list[Action]:
        if facts.nvidia.driver_version and facts.nvidia.driver_version.startswith(f"{self.branch}."):
            return []
        source = self.runfile or ""
        fetch = f"curl -fsSL -o /tmp/nvidia.run {q(source)}" if "://" in source else f"cp {q(source)} /tmp/nvidia.run"
        module = " -m=kernel-open" if flavor == "open" else ""
        return [Action(f"install the driver from {source}", "method: runfile",
                       f"{fetch} && sh /tmp/nvidia.run --dkms --silent{module} -k {q(target)}; rc=$?; "
                       "rm -f /tmp/nvidia.run; exit $rc", timeout=self.timeout,
                       fix="see /var/log/nvidia-installer.log on the host")]

    def _fabricmanager_actions(self, ctx: StepContext, pkgs: DriverPackages, installed: dict[str, str]) -> list[Action]:
        wanted = self.fabricmanager == "yes" or (self.fabricmanager == "auto" and ctx.facts.nvswitch_present)
        if not wanted or not pkgs.fabricmanager:
            return []
        driver = next((v for p, v in installed.items() if p in pkgs.pinned), None)
        manager = manager_for(ctx.facts.os.package_manager)
        specs = [Wanted(p, driver) for p in pkgs.fabricmanager]  # exactly the driver's version
        return [Action(f"install and enable {', '.join(pkgs.fabricmanager)} (driver version {driver or 'same'})",
                       "NVSwitch devices present: CUDA fails without a fabric manager of the same version",
                       f"{manager.install(specs, refresh=False, recommends=False)} && "
                       "systemctl enable nvidia-fabricmanager", timeout=self.timeout)]


def _sections(output: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    name = ""
    for line in output.splitlines(keepends=True):
        if line.startswith("@@") and line.strip()[2:] in ("dkms", "held", "persistenced", "pkgs"):
            name = line.strip()[2:]
            continue
        sections[name] = sections.get(name, "") + line
    return sections


def _dkms_installed(status: str, module: str, kernel: str) -> bool:
    """True when `dkms status` shows `module` installed for `kernel` (dkms 2.x and 3.x formats)."""
    for line in status.splitlines():
        head, _, state = line.partition(":")
        parts = [p.strip() for p in head.replace("/", ",").split(",")]
        if parts and parts[0] == module and kernel in parts and state.strip().startswith("installed"):
            return True
    return False
