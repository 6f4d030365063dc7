"""What a driver change removes, lets go of and holds: the other module flavour's packages, the driver's separately
versioned kin, and the holds an update within the branch must lift first."""

from __future__ import annotations

import re

from gpunode.connection import join
from gpunode.distros.base import Distro
from gpunode.facts import Facts
from gpunode.parsers.package_versions import SEPARATELY_VERSIONED
from gpunode.steps.base import Action
from gpunode.steps.pkgmgr import PackageManager

# A driver version as a user writes it: the branch, then one or two dotted numbers (535.309.01, 550.163.01, 570.86).
DRIVER_VERSION = re.compile(r"^(\d{3})\.\d+(?:\.\d+)?$")


def check_driver_version(version: str | None, branch: int) -> None:
    """A `version` of the driver is one of `branch`: raise ValueError (a usage error) when it is not."""
    if version is None:
        return
    match = DRIVER_VERSION.match(version)
    if not match:
        raise ValueError(f"nvidia_driver.version {version!r} is not a driver version: write it as nvidia-smi "
                         "prints it, e.g. 535.309.01")
    if int(match.group(1)) != branch:
        raise ValueError(f"nvidia_driver.version {version} is not of branch {branch}: set branch: "
                         f"{match.group(1)} as well, or a version of branch {branch}")


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
