"""The distro matrix: package names and repositories derived from facts, per distribution.

Sources: Ubuntu's server driver packages (https://ubuntu.com/server/docs/nvidia-drivers-installation),
Debian's non-free driver (https://wiki.debian.org/NvidiaGraphicsDrivers), NVIDIA's driver installation guide
(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/), the container toolkit install guide
(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.facts import OsInfo
from gpunode.facts.packages import version_key
from gpunode.gpu.driver_facts import AL2023, EL, UBUNTU
from gpunode.gpu.repo_facts import CUDA_REPO, DOCKER, TOOLKIT
from gpunode.vendor_facts import value

SUPPORTED = {
    "ubuntu": ("20.04", "22.04", "24.04"),
    "debian": ("11", "12", "13"),
    "rhel": ("8", "9"), "rocky": ("8", "9"), "almalinux": ("8", "9"),
    "amzn": ("2023",),
    "alinux": ("3",),          # Alibaba Cloud Linux 3: EL 8 compatible (PLATFORM_ID platform:al8)
    "tencentos": ("3", "4"),   # TencentOS Server 3: EL 8 compatible; 4: EL 9 compatible
}
# Distros we know and refuse, with the reason and what to use instead.
REFUSED = {
    ("amzn", "2"): "Amazon Linux 2 reached its end of support on 2026-06-30 (no more kernel or security updates; "
                   "awslabs/amazon-eks-ami removed its AL2 templates) -- use Amazon Linux 2023 (the EKS/ECS "
                   "AL2023 GPU AMIs, or al2023-ami-* with this playbook)",
}
# Enterprise-Linux clones: which RHEL major their packages (EPEL, NVIDIA's rhelN repositories, Docker's) match.
EL_COMPAT = {("alinux", 3): 8, ("tencentos", 3): 8, ("tencentos", 4): 9}


class UnsupportedDistro(ValueError):
    """The host's distribution or version is not in the matrix."""


def check_supported(os: OsInfo) -> None:
    """Raise UnsupportedDistro (with what to use instead) for a distro outside the matrix."""
    refused = REFUSED.get((os.id, os.version_id)) or REFUSED.get((os.id, str(os.version_major)))
    if refused:
        raise UnsupportedDistro(f"{os.pretty_name or os.id} is not supported: {refused}")
    versions = SUPPORTED.get(os.id)
    if versions is None or (os.version_id not in versions and str(os.version_major) not in versions):
        known = "; ".join(f"{k} {'/'.join(v)}" for k, v in SUPPORTED.items())
        raise UnsupportedDistro(f"{os.pretty_name or os.id} is not supported (supported: {known})")


def el_major(os: OsInfo) -> int | None:
    """The RHEL major an RPM distro is compatible with (Rocky 9 -> 9, Alibaba Cloud Linux 3 -> 8); None otherwise."""
    if os.id in ("rhel", "rocky", "almalinux", "centos"):
        return os.version_major
    return EL_COMPAT.get((os.id, os.version_major or 0))


def kernel_flavour(kernel: str) -> str:
    """The flavour suffix of a distro kernel release: 6.1.0-27-cloud-amd64 -> cloud-amd64, 6.8.0-1015-aws -> aws,
    Debian 13's 6.12.48+deb13-cloud-amd64 -> cloud-amd64."""
    match = re.match(r"^\d+\.\d+\.\d+(?:-\d+(?:\.\d+)*|\+deb\d+)-(?P<flavour>[a-z][\w-]*)$", kernel)
    return match.group("flavour") if match else ""


def kernel_base_package(os: OsInfo, kernel_package: str = "") -> str:
    """The RPM kernel package line: `kernel`, or AL2023's `kernel6.12`/`kernel6.18` (from the facts'
    owner of /lib/modules/<running>, as amazon-eks-ami's al2023 install-nvidia-driver.sh picks it)."""
    return kernel_package or "kernel"


def headers_packages(os: OsInfo, kernel: str, kernel_package: str = "") -> list[str]:
    """The packages with headers/devel files for exactly this kernel (AL2023 adds -modules-extra)."""
    if os.family == "debian":
        return [f"linux-headers-{kernel}"]
    base = kernel_base_package(os, kernel_package)
    if os.id == "amzn":
        return [f"{base}{suffix}-{kernel}" for suffix in value(AL2023, "build_suffixes")]
    return [f"{base}-devel-{kernel}"]


def headers_package(os: OsInfo, kernel: str, kernel_package: str = "") -> str:
    """The main headers/devel package for exactly this kernel."""
    return headers_packages(os, kernel, kernel_package)[0]


def headers_pattern(os: OsInfo) -> str:
    """A name glob for listing the headers packages the distro offers."""
    return "linux-headers-[0-9]*" if os.family == "debian" else "kernel-devel"


def newest_kernel_packages(os: OsInfo, running: str, kernel_package: str = "") -> list[str]:
    """Packages that install the distro's newest kernel of the running flavour (or line), with matching headers."""
    if os.id == "ubuntu":
        flavour = kernel_flavour(running) or "generic"
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]
    if os.id == "debian":
        flavour = kernel_flavour(running)
        flavour = flavour if flavour in ("amd64", "cloud-amd64", "arm64", "cloud-arm64") else \
            ("cloud-arm64" if os.arch == "aarch64" else "cloud-amd64")
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]
    base = kernel_base_package(os, kernel_package)
    if os.id == "amzn":
        return [base, *(f"{base}{suffix}" for suffix in value(AL2023, "build_suffixes"))]
    return [base, f"{base}-devel"]


def kernel_hold_packages(os: OsInfo, kernel: str, kernel_package: str = "") -> list[str]:
    """What to hold so the kernel the driver is built for stays: exact packages on apt, names on dnf."""
    if os.family == "debian":
        return [f"linux-image-{kernel}", f"linux-headers-{kernel}"]
    base = kernel_base_package(os, kernel_package)
    return [base, f"{base}-devel"]


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

    def module_switch(self) -> str:
        """Shell that switches an installed driver to this stream (branch or module flavour), NVIDIA's way."""
        switch = value(EL, "module_switch").format(stream=self.module_stream)
        return f"{self.repo_add} && {switch}" if self.repo_add else switch


# NVIDIA's RPM open DKMS module was registered as `nvidia-open` until 570.148.08, `nvidia` from then on
# (awslabs/amazon-eks-ami templates/al2023/provisioners/install-nvidia-driver.sh).
RPM_OPEN_DKMS_RENAMED_IN = value(EL, "open_dkms_renamed_in")
# From R580 NVIDIA's repositories name the fabric manager `nvidia-fabricmanager` on RPM too (before:
# `nvidia-fabric-manager`) and drop the branch from the NSCQ and apt fabric manager package names.
UNVERSIONED_FM_FROM_BRANCH = 580


def ubuntu_live_server_branch(branch: int) -> int | None:
    """The branch Canonical's packages of an ended server branch install instead (550 -> 580: 550's transitional
    packages depend on 570's, which depend on 580's); None for a branch that is itself live or unknown."""
    moved = value(UBUNTU, "server_transitional")
    if branch not in moved:
        return None
    while branch in moved:
        branch = moved[branch]
    return branch


def dkms_module_name(os: OsInfo, method: str, flavor: str, driver_version: str | None) -> str:
    """The name `dkms status` lists the driver's module under."""
    if method == "runfile":
        return "nvidia"
    if method == "distro" and os.id == "debian":
        return "nvidia-current-open" if flavor == "open" else "nvidia-current"
    if method == "distro" and os.id == "ubuntu":  # Canonical's -server DKMS packages
        return value(UBUNTU, "dkms_module_open" if flavor == "open" else "dkms_module")
    renamed = driver_version is not None and version_key(driver_version) >= version_key(RPM_OPEN_DKMS_RENAMED_IN)
    return "nvidia-open" if os.family != "debian" and flavor == "open" and not renamed else "nvidia"


def fabricmanager_packages(os: OsInfo, method: str, branch: int) -> tuple[str, ...]:
    """Fabric manager and NSCQ packages; empty when the distro has none (Debian's own archive)."""
    new = branch >= UNVERSIONED_FM_FROM_BRANCH
    if os.family == "debian":
        if method == "distro" and os.id == "debian":
            return ()
        return ("nvidia-fabricmanager", "libnvidia-nscq") if new and method == "cuda-repo" else \
            (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}")
    return ("nvidia-fabricmanager", "libnvidia-nscq") if new else \
        ("nvidia-fabric-manager", f"libnvidia-nscq-{branch}")


def driver_packages(os: OsInfo, method: str, branch: int, flavor: str) -> DriverPackages:
    """Package set for method distro or cuda-repo (the runfile method installs no packages)."""
    check_supported(os)
    open_suffix = "-open" if flavor == "open" else ""
    fm = fabricmanager_packages(os, method, branch)
    if method == "distro":
        if os.id == "ubuntu":
            pkgs = (value(UBUNTU, "headless_package").format(branch=branch, open=open_suffix),
                    value(UBUNTU, "utils_package").format(branch=branch))
            return DriverPackages(pkgs, pkgs, dkms_module_name(os, method, flavor, None), fm, version_from=pkgs[1])
        if os.id == "debian":
            if flavor == "open" and (os.version_major or 0) < 13:
                raise UnsupportedDistro(f"Debian {os.version_id}'s open module package lags its driver version "
                                        "(Debian 13 has nvidia-open-kernel-dkms in contrib); use kernel_modules: "
                                        "proprietary or method: cuda-repo")
            kernel_pkg = "nvidia-open-kernel-dkms" if flavor == "open" else "nvidia-kernel-dkms"
            pkgs = (kernel_pkg, "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced",
                    "firmware-nvidia-gsp")
            return DriverPackages(pkgs, pkgs[:4] + pkgs[5:], dkms_module_name(os, method, flavor, None), (),
                                  version_from=kernel_pkg)
        if os.family in ("redhat", "amazon"):
            # EPEL/RPM Fusion are no server drivers: on EL and Amazon Linux "distro" means NVIDIA's dnf module.
            method = "cuda-repo"
        else:
            raise UnsupportedDistro(f"no distro driver packages known for {os.id}")
    if method == "cuda-repo":
        repo = cuda_repo_name(os)
        arch = value(CUDA_REPO, "arm_arch") if os.arch == "aarch64" else "x86_64"
        base = value(CUDA_REPO, "base_url").format(repo=repo, arch=arch)
        if os.family == "debian":
            setup = (f"[ -e /usr/share/keyrings/cuda-archive-keyring.gpg ] || {{ curl -fsSL -o /tmp/cuda-keyring.deb "
                     f"{base}/{value(CUDA_REPO, 'keyring_package')} && dpkg -i /tmp/cuda-keyring.deb; }}")
            pkgs = (f"nvidia-open-{branch}",) if flavor == "open" else (f"cuda-drivers-{branch}",)
            return DriverPackages(pkgs, pkgs, "nvidia", fm, setup, version_from=pkgs[0])
        stream = value(EL, "module_stream_open" if flavor == "open" else "module_stream").format(branch=branch)
        add = f"dnf config-manager --add-repo {value(CUDA_REPO, 'rpm_repo_file').format(base=base, repo=repo)}"
        setup = f"{add} && dnf -y module install nvidia-driver:{stream}"
        kmod = "kmod-nvidia-open-dkms" if flavor == "open" else "kmod-nvidia-latest-dkms"
        pkgs = ("nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced", kmod)
        return DriverPackages(pkgs, pkgs, "nvidia", fm, setup, version_from="nvidia-driver", module_stream=stream,
                              repo_add=add)
    raise ValueError(f"unknown driver method {method!r}")


def ubuntu_precompiled_packages(os: OsInfo, branch: int, flavor: str, kernel: str) -> DriverPackages:
    """Canonical's precompiled, signed modules for exactly `kernel`, with the driver without DKMS (what NVIDIA's
    precompiled Ubuntu driver container installs); no DKMS module to check."""
    open_suffix = "-open" if flavor == "open" else ""
    names = dict(branch=branch, open=open_suffix, kernel=kernel)
    pkgs = [value(UBUNTU, "headless_no_dkms_package").format(**names),
            value(UBUNTU, "utils_package").format(**names)]
    if flavor != "open":
        pkgs.append(value(UBUNTU, "precompiled_objects").format(**names))
    pkgs.append(value(UBUNTU, "precompiled_modules").format(**names))
    if os.arch != "aarch64":
        pkgs.append(value(UBUNTU, "precompiled_signatures").format(**names))
    fm = fabricmanager_packages(os, "distro", branch)
    return DriverPackages(tuple(pkgs), tuple(pkgs), "", fm, version_from=pkgs[1])


def el_kernel_stem(kernel: str) -> str:
    """An EL kernel release as NVIDIA's precompiled kmod names carry it: 5.14.0-427.13.1.el9_4.x86_64 ->
    5.14.0-427.13.1 (driver_facts EL precompiled_kmod); "" for a kernel of no EL dist (Amazon Linux, Alibaba,
    TencentOS: NVIDIA builds no precompiled modules for them)."""
    match = re.match(r"^(\d+\.\d+\.\d+-\d+(?:\.\d+)*)\.el\d+\S*$", kernel)
    return match.group(1) if match else ""


def el_precompiled_packages(os: OsInfo, branch: int, kmod: str) -> DriverPackages:
    """NVIDIA's precompiled stream nvidia-driver:<branch> with the kmod package built for one kernel, the driver
    pinned to the kmod's version (`module enable`, not `module install`: the stream's default profile would take
    the kmod of the newest kernel, and that kernel with it)."""
    dkms = driver_packages(os, "cuda-repo", branch, "proprietary")
    stream = value(EL, "precompiled_stream").format(branch=branch)
    version = kmod.removeprefix("kmod-nvidia-").split("-", 1)[0]
    pkgs = (*dkms.packages[:-1], kmod)
    return DriverPackages(pkgs, pkgs, "", dkms.fabricmanager, f"{dkms.repo_add} && dnf -y module enable "
                          f"nvidia-driver:{stream}", version_from="nvidia-driver", module_stream=stream,
                          repo_add=dkms.repo_add, version=version)


_OTHER_BRANCH = 999999  # stands for "any branch" when matching held package names


def other_driver_packages(os: OsInfo, method: str, branch: int, flavor: str, names: set[str]) -> list[str]:
    """Those of `names` (held packages) that belong to another branch or module flavour of this method's driver:
    on apt each branch has its own package names and conflicts with the others (Canonical's nvidia-headless-<b>-server
    all provide nvidia-headless), so a held old branch makes apt refuse the new one ("held packages")."""
    if os.family != "debian" or method == "distro" and os.id == "debian":
        return []
    current = {*driver_packages(os, method, branch, flavor).packages, *fabricmanager_packages(os, method, branch)}
    patterns = []
    for other in ("open", "proprietary"):
        pkgs = driver_packages(os, method, _OTHER_BRANCH, other)
        for name in (*pkgs.packages, *fabricmanager_packages(os, method, _OTHER_BRANCH)):
            patterns.append(re.compile(re.escape(name).replace(str(_OTHER_BRANCH), r"\d+") + "$"))
    return sorted(n for n in names if n not in current and any(p.match(n) for p in patterns))


def cuda_repo_name(os: OsInfo) -> str:
    """NVIDIA's CUDA repository folder for the distro (ubuntu2204, debian12, rhel9, amzn2023...).

    EL clones use the repository of the RHEL major they follow: Alibaba Cloud Linux 3 and TencentOS 3 -> rhel8,
    TencentOS 4 -> rhel9 (NVIDIA publishes none of their own; their kernels are EL-ABI compatible and the
    packages are DKMS builds, compiled on the host against its own kernel-devel).
    """
    if os.id == "ubuntu":
        return "ubuntu" + os.version_id.replace(".", "")
    if os.id == "debian":
        return f"debian{os.version_major}"
    el = el_major(os)
    if el:
        return value(CUDA_REPO, "rhel_folder").format(major=el)
    if os.id == "amzn" and os.version_id == "2023":
        return value(CUDA_REPO, "amzn2023_folder")
    raise UnsupportedDistro(f"no NVIDIA CUDA repository for {os.id} {os.version_id}")


DOCKER_CE_PACKAGES: tuple[str, ...] = value(DOCKER, "ce_packages")


def docker_packages(os: OsInfo) -> tuple[str, ...]:
    """docker.io on Debian/Ubuntu, docker on Amazon Linux, docker-ce from Docker's repository on EL
    (moby-engine is in no EL 8/9 repository). From Debian 13 the client is its own package (docker-cli), only
    recommended by docker.io."""
    if os.id == "debian" and (os.version_major or 0) >= 13 or os.id == "debian" and not os.version_id:
        return ("docker.io", "docker-cli")
    if os.family == "debian":
        return ("docker.io",)
    if os.id == "amzn":
        return ("docker",)
    return DOCKER_CE_PACKAGES


def docker_repo_file(os: OsInfo) -> tuple[str, str] | None:
    """(path, content) of Docker's repository on EL-compatible hosts; None where the distro ships Docker.

    The major is written out instead of $releasever: on Alibaba Cloud Linux 3 and TencentOS, $releasever is
    3 or 4, for which Docker publishes nothing. RHEL uses Docker's rhel tree, the clones its centos tree.
    """
    el = el_major(os)
    if el is None:
        return None
    url = value(DOCKER, "rhel_repo_base" if os.id == "rhel" else "centos_repo_base")
    return ("/etc/yum.repos.d/docker-ce.repo",
            f"[docker-ce-stable]\nname=Docker CE Stable - $basearch\nbaseurl={url}/{el}/$basearch/stable\n"
            f"enabled=1\ngpgcheck=1\ngpgkey={url}/gpg\n")


TOOLKIT_PACKAGES: tuple[str, ...] = value(TOOLKIT, "packages")
TOOLKIT_REPO: str = value(TOOLKIT, "repo_url")
TOOLKIT_KEYRING: str = value(TOOLKIT, "apt_keyring")
# gpunode's own addition to NVIDIA's section: verify TLS against the system bundle (EL and Amazon Linux path).
_YUM_TLS = "sslverify=1\nsslcacert=/etc/pki/tls/certs/ca-bundle.crt\n"


def toolkit_repo_file(os: OsInfo, repo_url: str = TOOLKIT_REPO) -> tuple[str, str]:
    """(path, content) of the container toolkit's repository definition, with a signed-by keyring for apt."""
    url = repo_url.rstrip("/")
    if os.family == "debian":
        line = value(TOOLKIT, "apt_line").format(url=url)
        return (value(TOOLKIT, "apt_list"), f"deb [signed-by={TOOLKIT_KEYRING}] {line}\n")
    return (value(TOOLKIT, "yum_repo"), value(TOOLKIT, "yum_section").format(url=url) + _YUM_TLS)


# Old nvidia-docker / libnvidia-container list files without signed-by; next to the new one they make apt fail
# with "Conflicting values set for option Signed-By".
STALE_TOOLKIT_LISTS = ("/etc/apt/sources.list.d/nvidia-docker.list", "/etc/apt/sources.list.d/libnvidia-container.list")
