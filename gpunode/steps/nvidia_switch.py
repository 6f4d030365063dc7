"""What a driver change removes, lets go of and holds: the other module flavour's packages, the driver's separately
versioned kin, the holds an update within the branch must lift first, and the held packages of another branch or
flavour in an install's way; whether NVIDIA's dnf module switches streams."""

from __future__ import annotations

import re

from gpunode.connection import join
from gpunode.distros import DriverPackages, for_os
from gpunode.distros.base import Distro
from gpunode.facts import Facts
from gpunode.facts.packages import upstream_version
from gpunode.parsers.package_versions import SEPARATELY_VERSIONED
from gpunode.steps.base import Action, ArgumentError
from gpunode.steps.pkgmgr import PackageManager

# A driver version as a user writes it: the branch, then one or two dotted numbers (535.309.01, 550.163.01, 570.86).
DRIVER_VERSION = re.compile(r"^(\d{3})\.\d+(?:\.\d+)?$")


def check_driver_version(version: str | None, branch: int) -> None:
    """A `version` of the driver is one of `branch`: raise ArgumentError naming `version` (a usage error, which names
    the variable the value came from) when it is not. Two-part versions are real (390.157)."""
    if version is None:
        return
    match = DRIVER_VERSION.match(version)
    if not match:
        raise ArgumentError(f"nvidia_driver.version {version!r} is not a driver version: write it as nvidia-smi "
                            "prints it, e.g. 535.309.01", "version")
    if int(match.group(1)) != branch:
        raise ArgumentError(f"nvidia_driver.version {version} is not of branch {branch}: set the branch to "
                            f"{match.group(1)} as well, or give a version of branch {branch}", "version")


def present_packages(facts: Facts, names: tuple[str, ...]) -> list[str]:
    """Those of `names` that dpkg has on the host in any state but removed: installed, or left half-way (a failed
    DKMS build leaves its package half-configured)."""
    unfinished = {entry.partition(":")[0] for entry in facts.pkg.dpkg_unfinished}
    return [n for n in names if n in facts.installed_packages or n in unfinished]


def leftover_flavour_action(facts: Facts, distro: Distro, method: str, branch: int, flavor: str,
                            held: set[str]) -> tuple[list[Action], set[str]]:
    """The other module flavour's packages still on the host, removed before anything else runs (a repair would
    build them again). (actions, the packages removed)."""
    present = present_packages(facts, distro.coexisting_flavour_packages(method, branch, flavor))
    if not present:
        return [], set()
    other = "proprietary" if flavor == "open" else "open"
    unhold = [n for n in present if n in held]
    # dpkg itself: it removes a half-configured package (its prerm takes the module out of DKMS) and refuses,
    # naming it, when an installed package depends on one of them, where apt would remove that package too.
    remove = f"dpkg --remove -- {join(present)}"
    command = f"apt-mark unhold -- {join(unhold)} && {remove}" if unhold else remove
    return [Action(f"remove the {other} kernel modules' packages: {', '.join(present)}",
                   f"kernel_modules is {flavor}; the {other} flavour's packages do not conflict with it and stay "
                   "installed otherwise: DKMS would build both flavours at every kernel install, and a failed build "
                   "of the other one fails the kernel package's configure", command, timeout=600,
                   fix=f"read dpkg's message: a package that depends on {present[0]} must go first "
                   f"(apt-get remove it), then rerun")], set(present)


def kin_installed(facts: Facts) -> list[str]:
    """The driver's separately versioned packages on the host (nvidia-modprobe, nvidia-persistenced...): the driver
    depends on them with `>=`, so an upgrade moves them ahead of a held driver unless they are held too."""
    return [n for n in SEPARATELY_VERSIONED if n in facts.installed_packages]


def kin_shell(manager: PackageManager, names: list[str]) -> str:
    """Shell printing which of `names` (the driver's kin) are installed once the install ran."""
    if manager.name == "apt":
        return (f"$(dpkg-query -W -f='${{db:Status-Abbrev}} ${{Package}}\\n' -- {join(names)} "
                "2>/dev/null | awk '$1 == \"ii\" {print $2}')")
    return f"$(rpm -q --qf '%{{NAME}}\\n' -- {join(names)} 2>/dev/null | grep -v ' ')"


def hold_action(manager: PackageManager, pinned: list[str], held: set[str], switch: bool, installing: bool,
                facts: Facts) -> list[Action]:
    """The driver packages and their kin held (unattended upgrades cause version mismatches). An install adds kin
    that the host did not have: which of them is installed is read on the host when the hold runs."""
    unheld = [p for p in pinned if p not in held or switch]
    kin = [n for n in kin_installed(facts) if n not in unheld and (n not in held or switch)]
    names = unheld + kin
    later = [n for n in SEPARATELY_VERSIONED if n not in names] if installing else []
    if not names:
        return []
    summary = f"hold {', '.join(names)}" + (f" and, where the install brings them, {', '.join(later)}" if later else "")
    command = manager.hold(names) + (f" {kin_shell(manager, later)}" if later else "")
    return [Action(summary, "unattended upgrades must not cause a driver/library version mismatch", command)]


def update_holds(pinned: list[str], facts: Facts, held: set[str]) -> list[str]:
    """The held packages an update within the branch must let go of first (the driver's and its kin)."""
    return sorted(n for n in {*pinned, *kin_installed(facts)} if n in held)


def unhold_first(actions: list[Action], manager: PackageManager, holds: list[str]) -> list[Action]:
    """An update within the branch: the held driver packages and kin let go of before the install."""
    if not holds:
        return actions
    return [Action(f"let go of the driver's holds for the update: {', '.join(holds)}",
                   "apt and dnf refuse to change a held package; the hold is put back after the install",
                   manager.unhold(holds)), *actions]


def stale_holds(facts: Facts, pkgs: DriverPackages, method: str, branch: int, flavor: str, held: set[str],
                switch: str) -> list[str]:
    """Held packages that would block this install: on apt another branch's or flavour's packages; on dnf, when
    the stream switches, the version locks of the driver and fabric manager packages."""
    distro = for_os(facts.os)
    if distro.package_format == "deb":
        other = set(distro.other_driver_packages(method, branch, flavor, held))
        if distro.archive_precompiled(method):
            other |= {n for n in held if n not in pkgs.packages and distro.is_precompiled_package(n)}
        # another branch's driver: its held kin (nvidia-modprobe...) would keep the new branch's from installing
        return sorted(other | ({n for n in kin_installed(facts) if n in held} if other else set()))
    if not switch:
        return []
    ours = set(pkgs.pinned) | set(distro.fabricmanager_packages(method, branch)) | \
        set(kin_installed(facts))
    return sorted(n for n in held if n in ours or n.startswith(("nvidia-fabric", "libnvidia-nscq")))


def rpm_switch(pkgs: DriverPackages, installed: dict[str, str], branch: int) -> str:
    """Why NVIDIA's dnf module must switch streams ("" when it need not): the installed driver is of another
    branch, or its kernel module package is the other flavour's (kmod-nvidia-latest-dkms vs -open-dkms)."""
    have = installed.get(pkgs.version_from)
    if not pkgs.module_stream or have is None:
        return ""
    version = upstream_version(have)
    if not version.startswith(f"{branch}."):
        return f"driver {version} is installed, branch {branch} is wanted"
    kmod = pkgs.packages[-1]
    return "" if kmod in installed else \
        f"driver {version} is installed without {kmod} (the other module flavour's stream, or cut off)"


def update_reason(pkgs: DriverPackages, installed: dict[str, str], version: str | None) -> str:
    """Why the installed driver is updated within its branch ("" when it is not): `version` asks for another."""
    have = installed.get(pkgs.version_from)
    if not version or have is None or upstream_version(have) == version:
        return ""
    return f"driver {upstream_version(have)} is installed, version {version} is asked for"
