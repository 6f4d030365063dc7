"""The adapter protocol: what gpunode asks of a distro, and the parts every adapter shares."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from gpunode.distros.repos import CUDA_REPO, DCGM
from gpunode.vendor_facts import value

if TYPE_CHECKING:  # protocols only for the type checker: no class made at import
    class OsRelease(Protocol):
        """What an adapter reads of a host's identity (gpunode.facts.OsInfo has these fields)."""

        @property
        def id(self) -> str: ...
        @property
        def id_like(self) -> tuple[str, ...]: ...
        @property
        def version_id(self) -> str: ...
        @property
        def version_major(self) -> int | None: ...
        @property
        def pretty_name(self) -> str: ...
        @property
        def family(self) -> str: ...
        @property
        def arch(self) -> str: ...
        @property
        def codename(self) -> str | None: ...

    class CrbAccess(Protocol):
        """How an RHEL host gets its content (gpunode.facts.PackageManagerInfo has these fields)."""

        @property
        def rhsm_registered(self) -> bool: ...
        @property
        def rhui_repo_files(self) -> tuple[str, ...]: ...


class UnsupportedDistro(ValueError):
    """The host's distribution, version or driver choice is not in the matrix; `fix` says what to do instead."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class DriverPackages:
    """What one driver install consists of, on one distro."""

    packages: tuple[str, ...]          # installed in one command
    pinned: tuple[str, ...]            # packages whose version must be the driver's (held afterwards)
    dkms_module: str                   # the DKMS module name to check
    fabricmanager: tuple[str, ...]     # for NVSwitch systems (fabric manager + NSCQ), pinned to the driver
    repo_setup: str = ""               # shell run before installing (cuda-repo method)
    version_from: str = ""             # the installed package whose version is the driver's
    module_stream: str = ""            # NVIDIA's dnf module stream (RPM): 570-dkms, 570-open
    repo_add: str = ""                 # the repository part of repo_setup (RPM: without the module install)
    version: str = ""                  # the driver version the packages are pinned to (RPM precompiled kmod)
    switch: str = ""                   # shell switching NVIDIA's dnf module to module_stream (RPM)

    def module_switch(self) -> str:
        """Shell that switches an installed driver to this stream (branch or module flavour), NVIDIA's way."""
        return f"{self.repo_add} && {self.switch}" if self.repo_add else self.switch


def kernel_flavour(kernel: str) -> str:
    """The flavour suffix of a distro kernel release: 6.1.0-27-cloud-amd64 -> cloud-amd64, 6.8.0-1015-aws -> aws,
    6.12.48+deb13-cloud-amd64 -> cloud-amd64."""
    match = re.match(r"^\d+\.\d+\.\d+(?:-\d+(?:\.\d+)*|\+deb\d+)-(?P<flavour>[a-z][\w-]*)$", kernel)
    return match.group("flavour") if match else ""


def el_kernel_stem(kernel: str) -> str:
    """An EL kernel release as NVIDIA's precompiled kmod names carry it: 5.14.0-427.13.1.el9_4.x86_64 ->
    5.14.0-427.13.1 (rpm.EL precompiled_kmod); "" for a kernel of no EL dist (Amazon Linux, Alibaba, TencentOS:
    NVIDIA builds no precompiled modules for them)."""
    match = re.match(r"^(\d+\.\d+\.\d+-\d+(?:\.\d+)*)\.el\d+\S*$", kernel)
    return match.group(1) if match else ""


class Distro:
    """One host's distro adapter. Subclasses (one per family, then per distro) override what differs.

    Class attributes describe the distro; methods answer for the host's release (`self.os`)."""

    ids: ClassVar[tuple[str, ...]] = ()                         # os-release IDs this adapter serves
    supported: ClassVar[Mapping[str, tuple[str, ...]]] = {}     # id -> supported releases (the matrix)
    refused: ClassVar[Mapping[tuple[str, str], str]] = {}       # (id, release) -> why not, what instead
    package_format: ClassVar[Literal["deb", "rpm"]] = "rpm"
    # The module cache (gpunode/modcache/remote.py): the form a DKMS build travels in, and whether it is placed
    # before the driver packages go in (their own scriptlet builds at once: NVIDIA's kmod RPM's %post) or after
    # (their build paused with /etc/dkms/no-autoinstall: Debian's dkms postinst).
    module_cache_form: ClassVar[Literal["deb", "tar"]] = "tar"
    module_cache_before_install: ClassVar[bool] = True
    headers_script_family: ClassVar[str] = "rpm"                # kernel_headers.sh's FAMILY argument
    ca_bundle: ClassVar[str] = "/etc/pki/tls/certs/ca-bundle.crt"
    matrix_order: ClassVar[int] = 0   # where the distro's rows stand when the matrix is listed (messages)
    # Every adapter class with a `supported` table (filled at class creation; listed by matrix_order).
    matrix: ClassVar[list[type[Distro]]] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "supported" in cls.__dict__:
            Distro.matrix.append(cls)
            Distro.matrix.sort(key=lambda c: c.matrix_order)

    def __init__(self, os: OsRelease) -> None:
        self.os = os

    # --- the matrix -------------------------------------------------------------------------------------------
    def check_supported(self) -> None:
        """Raise UnsupportedDistro (with what to use instead) for a release outside the matrix."""
        os = self.os
        refused = {k: v for cls in Distro.matrix for k, v in cls.refused.items()}
        why = refused.get((os.id, os.version_id)) or refused.get((os.id, str(os.version_major)))
        if why:
            raise UnsupportedDistro(f"{os.pretty_name or os.id} is not supported: {why}")
        versions = self.supported.get(os.id)
        if versions is None or (os.version_id not in versions and str(os.version_major) not in versions):
            raise UnsupportedDistro(f"{os.pretty_name or os.id} is not supported (supported: {supported_text()})")

    def el_major(self) -> int | None:
        """The RHEL major an RPM distro is compatible with (Rocky 9 -> 9, Alibaba Cloud Linux 3 -> 8)."""
        return None

    # --- kernels ----------------------------------------------------------------------------------------------
    def headers_packages(self, kernel: str, kernel_package: str = "") -> list[str]:
        """The packages with headers/devel files for exactly this kernel."""
        raise NotImplementedError

    def headers_package(self, kernel: str, kernel_package: str = "") -> str:
        """The main headers/devel package for exactly this kernel."""
        return self.headers_packages(kernel, kernel_package)[0]

    def newest_kernel_packages(self, running: str, kernel_package: str = "") -> list[str]:
        """Packages that install the distro's newest kernel of the running flavour (or line), with headers."""
        raise NotImplementedError

    def kernel_hold_packages(self, kernel: str, kernel_package: str = "", installed: Collection[str] = ()) -> list[str]:
        """What to hold so the kernel the driver is built for stays (`installed`: the installed package names)."""
        raise NotImplementedError

    # --- the NVIDIA driver ------------------------------------------------------------------------------------
    def check_driver_choice(self, method: str, branch: int) -> None:
        """Raise UnsupportedDistro (with a fix) for a method/branch the distro cannot install as asked."""

    def driver_packages(self, method: str, branch: int, flavor: str) -> DriverPackages:
        """Package set for method distro or cuda-repo (the runfile method installs no packages)."""
        raise NotImplementedError

    def dkms_module_name(self, method: str, flavor: str, driver_version: str | None) -> str:
        """The name `dkms status` lists the driver's module under."""
        return "nvidia"

    def fabricmanager_packages(self, method: str, branch: int) -> tuple[str, ...]:
        """Fabric manager and NSCQ packages; empty when the distro has none."""
        raise NotImplementedError

    def other_driver_packages(self, method: str, branch: int, flavor: str, names: set[str]) -> list[str]:
        """Those of `names` (held packages) that belong to another branch or flavour of this method's driver."""
        return []

    def coexisting_flavour_packages(self, method: str, branch: int, flavor: str) -> tuple[str, ...]:
        """The other module flavour's packages that installing `flavor` leaves installed beside it (the packages do
        not conflict): they must be removed, or DKMS keeps building the other flavour at every kernel install."""
        return ()

    # The reason an apt sources edit gives when driver_components are missing from the host's sources.
    driver_components_reason: ClassVar[str] = ""

    def driver_components(self, method: str) -> tuple[str, ...]:
        """Archive components besides main that the driver of `method` comes from, which the host's apt sources
        must list for the distro's own archive (empty: the distro's sources need no change)."""
        return ()

    def is_archive_entry(self, uri: str, suite: str) -> bool:
        """An apt sources entry (one URI, one suite) that is the distro's own archive for the host's release."""
        return False

    def driver_pin(self, method: str, branch: int) -> str | None:
        """A version glob the distro's driver packages are installed at (None: the repository's)."""
        return None

    def archive_precompiled(self, method: str) -> bool:
        """The distro's archive has signed precompiled modules per kernel for this method (checked first)."""
        return False

    def archive_precompiled_packages(self, branch: int, flavor: str, kernel: str) -> DriverPackages:
        """The archive's precompiled modules for exactly `kernel` with the driver without DKMS."""
        raise NotImplementedError

    def dkms_headless_package(self, branch: int, flavor: str) -> str:
        """The DKMS build's main package of the branch (where the archive also has precompiled modules)."""
        raise NotImplementedError

    def precompiled_prefix(self, branch: int, flavor: str) -> str:
        """The start of the names of the branch's precompiled modules packages, one per kernel."""
        raise NotImplementedError

    @staticmethod
    def modules_package(pkgs: DriverPackages) -> str:
        """The precompiled modules package among `pkgs` ("" for a DKMS install)."""
        return ""

    @staticmethod
    def is_precompiled_package(name: str) -> bool:
        """A package of the archive's precompiled driver, of any branch or flavour."""
        return False

    def kmod_packages(self, branch: int, kmod: str) -> DriverPackages:
        """NVIDIA's precompiled dnf stream of the branch with one kernel's kmod package (RPM)."""
        raise NotImplementedError

    def nvidia_dnf_module(self, method: str) -> bool:
        """The driver comes from NVIDIA's dnf module (every RPM install but the runfile's)."""
        return False

    def driver_version_probe(self, pkgs: DriverPackages, branch: int) -> str:
        """Shell printing the driver version that installing `pkgs` would bring, changing nothing on the host ("":
        not known before the install; the module cache then places nothing first)."""
        return ""

    def driver_candidate_probe(self, pkgs: DriverPackages, branch: int) -> str:
        """Shell printing the driver version the install is expected to bring, for check mode's word on the module
        cache (which host builds, which installs from the cache); "" when it cannot be told beforehand."""
        return self.driver_version_probe(pkgs, branch)

    def cuda_repo_name(self) -> str:
        """NVIDIA's CUDA repository folder for the release (ubuntu2204, rhel9, amzn2023...)."""
        raise UnsupportedDistro(f"no NVIDIA CUDA repository for {self.os.id} {self.os.version_id}")

    def cuda_repo_base(self) -> str:
        """The address of NVIDIA's CUDA repository folder for the release and architecture."""
        arch = value(CUDA_REPO, "arm_arch") if self.os.arch == "aarch64" else "x86_64"
        return str(value(CUDA_REPO, "base_url")).format(repo=self.cuda_repo_name(), arch=arch)

    def cuda_repo_setup(self) -> str:
        """Shell adding NVIDIA's CUDA repository (the cuda-repo driver method, DCGM): the same on every use."""
        raise UnsupportedDistro(f"no NVIDIA CUDA repository for {self.os.id} {self.os.version_id}")

    def check_dcgm_supported(self) -> None:
        """Raise UnsupportedDistro unless NVIDIA lists the release among DCGM's distributions (distros/repos.py)."""
        supported: dict[str, tuple[str, ...]] = value(DCGM, "distributions")
        versions = supported.get(self.os.id, ())
        if self.os.version_id in versions or str(self.os.version_major) in versions:
            return
        listed = "; ".join(f"{k} {'/'.join(v)}" for k, v in supported.items())
        raise UnsupportedDistro(f"NVIDIA does not list {self.os.pretty_name or self.os.id} among DCGM's "
                                f"distributions (supported: {listed})",
                                fix="run DCGM on a supported distribution, or leave install_dcgm off on this host")

    def extra_repos(self, pkg: CrbAccess | None = None) -> str:
        """Shell enabling the repositories DKMS builds need (EPEL + CRB/PowerTools on EL); "" when none."""
        return ""

    # --- containers -------------------------------------------------------------------------------------------
    def docker_packages(self) -> tuple[str, ...]:
        """The Docker engine's packages."""
        raise NotImplementedError

    def docker_repo_file(self) -> tuple[str, str] | None:
        """(path, content) of Docker's repository where the distro does not ship Docker; None otherwise."""
        return None

    def toolkit_repo_file(self, repo_url: str) -> tuple[str, str]:
        """(path, content) of the container toolkit's repository definition."""
        raise NotImplementedError

    def toolkit_needs_keyring(self) -> bool:
        """The toolkit's repository is signed by a keyring file gpunode fetches (apt's signed-by)."""
        return False


def supported_text() -> str:
    """The matrix in one line: `id release/release; ...`."""
    table = {k: v for cls in Distro.matrix for k, v in cls.supported.items()}
    return "; ".join(f"{k} {'/'.join(v)}" for k, v in table.items())
