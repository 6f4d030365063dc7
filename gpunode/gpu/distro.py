"""The distro matrix as functions of a host's OsInfo: each asks the host's adapter (gpunode/distros/).

Kept for callers that hold an OsInfo and want one answer; steps ask `for_os(facts.os)` directly.
"""

from __future__ import annotations

from collections.abc import Collection

from gpunode.distros import DriverPackages, UnsupportedDistro, el_kernel_stem, for_os, kernel_flavour
from gpunode.distros.repos import (
    DOCKER_CE_PACKAGES,
    STALE_TOOLKIT_LISTS,
    TOOLKIT_KEYRING,
    TOOLKIT_PACKAGES,
    TOOLKIT_REPO,
)
from gpunode.facts import OsInfo

__all__ = ["DOCKER_CE_PACKAGES", "STALE_TOOLKIT_LISTS", "TOOLKIT_KEYRING", "TOOLKIT_PACKAGES", "TOOLKIT_REPO",
           "DriverPackages", "UnsupportedDistro", "check_supported", "cuda_repo_name", "dkms_module_name",
           "docker_packages", "docker_repo_file", "driver_packages", "el_kernel_stem", "el_major",
           "fabricmanager_packages", "headers_package", "headers_packages", "headers_pattern", "kernel_flavour",
           "kernel_hold_packages", "newest_kernel_packages", "other_driver_packages", "toolkit_repo_file"]


def check_supported(os: OsInfo) -> None:
    """Raise UnsupportedDistro (with what to use instead) for a distro outside the matrix."""
    for_os(os).check_supported()


def el_major(os: OsInfo) -> int | None:
    """The RHEL major an RPM distro is compatible with; None otherwise."""
    return for_os(os).el_major()


def headers_packages(os: OsInfo, kernel: str, kernel_package: str = "") -> list[str]:
    """The packages with headers/devel files for exactly this kernel."""
    return for_os(os).headers_packages(kernel, kernel_package)


def headers_package(os: OsInfo, kernel: str, kernel_package: str = "") -> str:
    """The main headers/devel package for exactly this kernel."""
    return for_os(os).headers_package(kernel, kernel_package)


def headers_pattern(os: OsInfo) -> str:
    """A name glob for listing the headers packages the distro offers."""
    return for_os(os).headers_pattern()


def newest_kernel_packages(os: OsInfo, running: str, kernel_package: str = "") -> list[str]:
    """Packages that install the distro's newest kernel of the running flavour (or line), with matching headers."""
    return for_os(os).newest_kernel_packages(running, kernel_package)


def kernel_hold_packages(os: OsInfo, kernel: str, kernel_package: str = "",
                         installed: Collection[str] = ()) -> list[str]:
    """What to hold so the kernel the driver is built for stays (the flavour's metapackages among `installed`)."""
    return for_os(os).kernel_hold_packages(kernel, kernel_package, installed)


def dkms_module_name(os: OsInfo, method: str, flavor: str, driver_version: str | None) -> str:
    """The name `dkms status` lists the driver's module under."""
    return for_os(os).dkms_module_name(method, flavor, driver_version)


def fabricmanager_packages(os: OsInfo, method: str, branch: int) -> tuple[str, ...]:
    """Fabric manager and NSCQ packages; empty when the distro has none."""
    return for_os(os).fabricmanager_packages(method, branch)


def driver_packages(os: OsInfo, method: str, branch: int, flavor: str) -> DriverPackages:
    """Package set for method distro or cuda-repo (the runfile method installs no packages)."""
    return for_os(os).driver_packages(method, branch, flavor)


def other_driver_packages(os: OsInfo, method: str, branch: int, flavor: str, names: set[str]) -> list[str]:
    """Those of `names` (held packages) that belong to another branch or module flavour of this method's driver."""
    return for_os(os).other_driver_packages(method, branch, flavor, names)


def cuda_repo_name(os: OsInfo) -> str:
    """NVIDIA's CUDA repository folder for the distro."""
    return for_os(os).cuda_repo_name()


def docker_packages(os: OsInfo) -> tuple[str, ...]:
    """The Docker engine's packages."""
    return for_os(os).docker_packages()


def docker_repo_file(os: OsInfo) -> tuple[str, str] | None:
    """(path, content) of Docker's repository where the distro does not ship Docker; None otherwise."""
    return for_os(os).docker_repo_file()


def toolkit_repo_file(os: OsInfo, repo_url: str = TOOLKIT_REPO) -> tuple[str, str]:
    """(path, content) of the container toolkit's repository definition, with a signed-by keyring for apt."""
    return for_os(os).toolkit_repo_file(repo_url)
