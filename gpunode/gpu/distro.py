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

SUPPORTED = {
    "ubuntu": ("20.04", "22.04", "24.04"),
    "debian": ("11", "12"),
    "rhel": ("8", "9"), "rocky": ("8", "9"), "almalinux": ("8", "9"),
    "amzn": ("2", "2023"),
}


class UnsupportedDistro(ValueError):
    """The host's distribution or version is not in the matrix."""


def check_supported(os: OsInfo) -> None:
    versions = SUPPORTED.get(os.id)
    if versions is None or (os.version_id not in versions and str(os.version_major) not in versions):
        known = "; ".join(f"{k} {'/'.join(v)}" for k, v in SUPPORTED.items())
        raise UnsupportedDistro(f"{os.pretty_name or os.id} is not supported (supported: {known})")


def kernel_flavour(kernel: str) -> str:
    """The flavour suffix of a distro kernel release: 6.1.0-27-cloud-amd64 -> cloud-amd64, 6.8.0-1015-aws -> aws."""
    match = re.match(r"^\d+\.\d+\.\d+-\d+(?:\.\d+)*-(?P<flavour>[a-z][\w-]*)$", kernel)
    return match.group("flavour") if match else ""


def headers_package(os: OsInfo, kernel: str) -> str:
    """The package with headers/devel files for exactly this kernel."""
    if os.family == "debian":
        return f"linux-headers-{kernel}"
    return f"kernel-devel-{kernel}"


def headers_pattern(os: OsInfo) -> str:
    """A name glob for listing the headers packages the distro offers."""
    return "linux-headers-[0-9]*" if os.family == "debian" else "kernel-devel"


def newest_kernel_packages(os: OsInfo, running: str) -> list[str]:
    """Packages that install the distro's newest kernel of the running flavour, with matching headers."""
    if os.id == "ubuntu":
        flavour = kernel_flavour(running) or "generic"
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]
    if os.id == "debian":
        flavour = kernel_flavour(running)
        flavour = flavour if flavour in ("amd64", "cloud-amd64", "arm64", "cloud-arm64") else \
            ("cloud-arm64" if os.arch == "aarch64" else "cloud-amd64")
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]
    return ["kernel", "kernel-devel"]


@dataclass(frozen=True)
class DriverPackages:
    """What one driver install consists of, on one distro."""

    packages: tuple[str, ...]          # installed in one command
    pinned: tuple[str, ...]            # packages whose version must be the driver's (held afterwards)
    dkms_module: str                   # the DKMS module name to check
    fabricmanager: tuple[str, ...]     # for NVSwitch systems
    repo_setup: str = ""               # shell run before installing (cuda-repo method)


def driver_packages(os: OsInfo, method: str, branch: int, flavor: str) -> DriverPackages:
    """Package set for method distro or cuda-repo (the runfile method installs no packages)."""
    open_suffix = "-open" if flavor == "open" else ""
    if method == "distro":
        if os.id == "ubuntu":
            pkgs = (f"nvidia-headless-{branch}-server{open_suffix}", f"nvidia-utils-{branch}-server")
            return DriverPackages(pkgs, pkgs, "nvidia", (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}"))
        if os.id == "debian":
            if flavor == "open":
                raise UnsupportedDistro("Debian's open module package lags the driver version; use "
                                        "kernel_modules: proprietary or method: cuda-repo")
            pkgs = ("nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced",
                    "firmware-nvidia-gsp")
            return DriverPackages(pkgs, pkgs[:4] + pkgs[5:], "nvidia-current", ())
        if os.family in ("redhat", "amazon"):
            # EPEL/RPM Fusion are no server drivers: on EL and Amazon Linux "distro" means NVIDIA's dnf module.
            method = "cuda-repo"
        else:
            raise UnsupportedDistro(f"no distro driver packages known for {os.id}")
    if method == "cuda-repo":
        repo = cuda_repo_name(os)
        arch = "sbsa" if os.arch == "aarch64" else "x86_64"
        base = f"https://developer.download.nvidia.com/compute/cuda/repos/{repo}/{arch}"
        if os.family == "debian":
            setup = (f"[ -e /usr/share/keyrings/cuda-archive-keyring.gpg ] || {{ curl -fsSL -o /tmp/cuda-keyring.deb "
                     f"{base}/cuda-keyring_1.1-1_all.deb && dpkg -i /tmp/cuda-keyring.deb; }}")
            pkgs = (f"nvidia-open-{branch}",) if flavor == "open" else (f"cuda-drivers-{branch}",)
            return DriverPackages(pkgs, pkgs, "nvidia", (f"nvidia-fabricmanager-{branch}",), setup)
        setup = (f"dnf config-manager --add-repo {base}/cuda-{repo}.repo && "
                 f"dnf -y module install nvidia-driver:{branch}-{'open' if flavor == 'open' else 'dkms'}")
        if os.id == "amzn" and os.version_id == "2":
            setup = f"yum-config-manager --add-repo {base}/cuda-rhel7.repo"
        return DriverPackages(("nvidia-driver", "nvidia-driver-cuda"), ("nvidia-driver",), "nvidia",
                              ("nvidia-fabric-manager",), setup)
    raise ValueError(f"unknown driver method {method!r}")


def cuda_repo_name(os: OsInfo) -> str:
    """NVIDIA's CUDA repository folder for the distro (ubuntu2204, debian12, rhel9, amzn2023...)."""
    if os.id == "ubuntu":
        return "ubuntu" + os.version_id.replace(".", "")
    if os.id == "debian":
        return f"debian{os.version_major}"
    if os.id in ("rhel", "rocky", "almalinux", "centos"):
        return f"rhel{os.version_major}"
    if os.id == "amzn":
        return "amzn2023" if os.version_id == "2023" else "rhel7"
    raise UnsupportedDistro(f"no NVIDIA CUDA repository for {os.id} {os.version_id}")


def docker_packages(os: OsInfo) -> tuple[str, ...]:
    """The distro's own Docker engine (docker.io on Debian/Ubuntu, docker on Amazon Linux, moby on EL).

    From Debian 13 the client is its own package (docker-cli), only recommended by docker.io."""
    if os.id == "debian" and (os.version_major or 0) >= 13 or os.id == "debian" and not os.version_id:
        return ("docker.io", "docker-cli")
    if os.family == "debian":
        return ("docker.io",)
    if os.id == "amzn":
        return ("docker",)
    return ("moby-engine", "moby-cli")


TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                    "libnvidia-container1")
TOOLKIT_REPO = "https://nvidia.github.io/libnvidia-container"
TOOLKIT_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"


def toolkit_repo_file(os: OsInfo, repo_url: str = TOOLKIT_REPO) -> tuple[str, str]:
    """(path, content) of the container toolkit's repository definition, with a signed-by keyring for apt."""
    url = repo_url.rstrip("/")
    if os.family == "debian":
        return ("/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                f"deb [signed-by={TOOLKIT_KEYRING}] {url}/stable/deb/$(ARCH) /\n")
    return ("/etc/yum.repos.d/nvidia-container-toolkit.repo",
            "[nvidia-container-toolkit]\nname=nvidia-container-toolkit\n"
            f"baseurl={url}/stable/rpm/$basearch\nrepo_gpgcheck=1\ngpgcheck=0\nenabled=1\n"
            f"gpgkey={url}/gpgkey\nsslverify=1\nsslcacert=/etc/pki/tls/certs/ca-bundle.crt\n")


# Old nvidia-docker / libnvidia-container list files without signed-by; next to the new one they make apt fail
# with "Conflicting values set for option Signed-By".
STALE_TOOLKIT_LISTS = ("/etc/apt/sources.list.d/nvidia-docker.list", "/etc/apt/sources.list.d/libnvidia-container.list")
