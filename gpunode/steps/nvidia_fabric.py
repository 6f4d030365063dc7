"""The fabric manager of an NVSwitch host: installed at exactly the driver's version, and started with the driver
when no reboot is ahead; a loaded driver that the install replaces asks for the reboot."""

from __future__ import annotations

from gpunode.distros import DriverPackages
from gpunode.facts.packages import upstream_version
from gpunode.gpu.driver_facts import NVIDIA
from gpunode.steps.base import Action, StepContext
from gpunode.steps.pkgmgr import PackageManager
from gpunode.vendor_facts import value


def fabricmanager_actions(manager: PackageManager, pkgs: DriverPackages, fm: tuple[str, ...],
                          installed: dict[str, str], driver_version: str | None, timeout: int) -> list[Action]:
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
                   timeout=timeout, fix="the fabric manager of exactly the driver's version must exist in "
                   "the repository")]


def ready_actions(ctx: StepContext, installing: bool, wants_fm: bool, persistenced: bool) -> list[Action]:
    """Leave the host ready when the run ends. A loaded driver that this run replaces stays loaded until a
    reboot (the new one cannot load beside it): reboot, as NVIDIA's role does after an install. On NVSwitch hosts
    CUDA needs the fabric manager running: with no reboot ahead, load the module and start nvidia-persistenced
    (when `persistenced`) and the fabric manager, in gpu-driver-container's order (modprobe nvidia, then the
    daemons); with a reboot ahead the enabled units start at boot."""
    loaded = ctx.facts.nvidia.driver_version
    if installing and loaded:
        ctx.require_reboot(f"the loaded driver {loaded} is replaced; the new one loads at the next boot")
    if not wants_fm or ctx.reboot_required:
        return []
    nvidia = ctx.facts.nvidia
    states = ((value(NVIDIA, "persistenced_unit"), nvidia.persistenced_active, persistenced),
              (value(NVIDIA, "fabricmanager_unit"), nvidia.fabricmanager_active, True))
    units = [unit for unit, active, wanted in states if wanted and (installing or active is False)]
    if not units:
        return []
    return [Action(f"load the driver and start {', '.join(units)}",
                   "NVSwitch host: CUDA fails until the fabric manager runs; no reboot is planned to start it",
                   f"modprobe nvidia && systemctl start {' '.join(units)}", timeout=300,
                   fix="see `journalctl -u nvidia-fabricmanager` and `dmesg | grep -i nvrm` on the host: the "
                   "fabric manager must be the driver's exact version")]
