"""The dpkg/apt family's shared facts: kernel packages, NVIDIA's CUDA repository on apt, the toolkit's apt list."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from typing import ClassVar, Literal

from gpunode.distros.base import Distro, DriverPackages
from gpunode.distros.repos import CUDA_REPO, TOOLKIT, TOOLKIT_KEYRING
from gpunode.vendor_facts import value

# From R580 NVIDIA's repositories drop the branch from the NSCQ and apt fabric manager package names (RPM: see rpm).
UNVERSIONED_FM_FROM_BRANCH = 580
_OTHER_BRANCH = 999999  # stands for "any branch" when matching held package names


class AptDistro(Distro):
    """A dpkg/apt distro: exact-version kernel packages, per-branch driver package names."""

    package_format: ClassVar[Literal["deb", "rpm"]] = "deb"
    module_cache_form: ClassVar[Literal["deb", "tar"]] = "deb"
    module_cache_before_install: ClassVar[bool] = False  # Debian's dkms postinst honours /etc/dkms/no-autoinstall
    headers_script_family: ClassVar[str] = "apt"
    ca_bundle: ClassVar[str] = "/etc/ssl/certs/ca-certificates.crt"

    def driver_candidate_probe(self, pkgs: DriverPackages, branch: int) -> str:
        """The version of `version_from` the host's package lists offer now (apt's candidate: `apt-cache show
        --no-all-versions` prints only the candidate's record, Debian/apt doc/apt-cache.8.xml:314-317 at 6b128124),
        cut to the upstream version as the installed one is read (pkgmgr version_of). Lists older than the install's
        refresh may offer an older version: it is a forecast for check mode, the install reads the real one."""
        if not pkgs.version_from:
            return ""
        return (f"apt-cache show --no-all-versions -- {shlex.quote(pkgs.version_from)} 2>/dev/null | "
                "sed -n 's/^Version: //p' | head -n 1 | sed 's/^[0-9]*://; s/-[^-]*$//'")

    def headers_packages(self, kernel: str, kernel_package: str = "") -> list[str]:
        return [f"linux-headers-{kernel}"]

    def kernel_hold_packages(self, kernel: str, kernel_package: str = "", installed: Collection[str] = ()) -> list[str]:
        """The kernel's own image and headers, and the flavour's metapackages among `installed`: a kernel update is
        a new package (the ABI is in its name) that the metapackage depends on, so holding only the exact packages
        lets `apt upgrade` install and boot a newer kernel (Debian's kernel handbook, ch. 3, the linux-latest
        metapackages: https://kernel-team.pages.debian.net/kernel-handbook/ch-packaging.html). A metapackage that
        is not installed is not held: `apt-mark hold` fails on a package it knows no version of."""
        metas = [p for p in self.newest_kernel_packages(kernel, kernel_package) if p in installed]
        return [f"linux-image-{kernel}", f"linux-headers-{kernel}", *metas]

    def fabricmanager_packages(self, method: str, branch: int) -> tuple[str, ...]:
        new = branch >= UNVERSIONED_FM_FROM_BRANCH
        return ("nvidia-fabricmanager", "libnvidia-nscq") if new and method == "cuda-repo" else \
            (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}")

    def distro_driver_packages(self, branch: int, flavor: str) -> DriverPackages:
        """The distro archive's own driver packages (method distro)."""
        raise NotImplementedError

    def driver_packages(self, method: str, branch: int, flavor: str) -> DriverPackages:
        self.check_supported()
        if method == "distro":
            return self.distro_driver_packages(branch, flavor)
        if method != "cuda-repo":
            raise ValueError(f"unknown driver method {method!r}")
        setup = self.cuda_repo_setup()
        pkgs = (f"nvidia-open-{branch}",) if flavor == "open" else (f"cuda-drivers-{branch}",)
        return DriverPackages(pkgs, pkgs, "nvidia", self.fabricmanager_packages(method, branch), setup,
                              version_from=pkgs[0])

    def cuda_repo_setup(self) -> str:
        """NVIDIA's cuda-keyring package from the release's repository folder (it writes the list and the key),
        unless its keyring is there already."""
        base = self.cuda_repo_base()
        return (f"[ -e /usr/share/keyrings/cuda-archive-keyring.gpg ] || {{ curl -fsSL -o /tmp/cuda-keyring.deb "
                f"{base}/{value(CUDA_REPO, 'keyring_package')} && dpkg -i /tmp/cuda-keyring.deb; }}")

    def other_driver_packages(self, method: str, branch: int, flavor: str, names: set[str]) -> list[str]:
        """On apt each branch has its own package names and conflicts with the others (Canonical's
        nvidia-headless-<b>-server all provide nvidia-headless), so a held old branch makes apt refuse the new one
        ("held packages")."""
        current = {*self.driver_packages(method, branch, flavor).packages,
                   *self.fabricmanager_packages(method, branch)}
        patterns = []
        for other in ("open", "proprietary"):
            pkgs = self.driver_packages(method, _OTHER_BRANCH, other)
            for name in (*pkgs.packages, *self.fabricmanager_packages(method, _OTHER_BRANCH)):
                patterns.append(re.compile(re.escape(name).replace(str(_OTHER_BRANCH), r"\d+") + "$"))
        return sorted(n for n in names if n not in current and any(p.match(n) for p in patterns))

    def toolkit_repo_file(self, repo_url: str) -> tuple[str, str]:
        url = repo_url.rstrip("/")
        line = value(TOOLKIT, "apt_line").format(url=url)
        return (value(TOOLKIT, "apt_list"), f"deb [signed-by={TOOLKIT_KEYRING}] {line}\n")

    def toolkit_needs_keyring(self) -> bool:
        return True

    def docker_packages(self) -> tuple[str, ...]:
        return ("docker.io",)
