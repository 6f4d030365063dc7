"""The distro matrix, from real os-release files: package names, repositories, kernel modules, runtime configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.distros import UnsupportedDistro, for_os, kernel_flavour
from gpunode.distros.repos import TOOLKIT_REPO
from gpunode.facts import parse_os_release
from gpunode.gpu.modules import choose_kernel_modules

OS_RELEASE = Path(__file__).parent / "data" / "os-release"


def os_info(name: str):
    return parse_os_release((OS_RELEASE / f"{name}.txt").read_text(), arch="x86_64")


EL_DRIVER = ("nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced", "kmod-nvidia-latest-dkms")
DOCKER_CE = ("docker-ce", "docker-ce-cli", "containerd.io")
# (fixture, running kernel, headers package, newest-kernel packages, driver packages (distro method, branch 535),
#  docker packages, CUDA repo folder)
MATRIX = [
    ("ubuntu-20.04", "5.15.0-1066-aws", "linux-headers-5.15.0-1066-aws", ["linux-image-aws", "linux-headers-aws"],
     ("nvidia-headless-535-server", "nvidia-utils-535-server"), ("docker.io",), "ubuntu2004"),
    ("ubuntu-22.04", "6.5.0-1022-aws", "linux-headers-6.5.0-1022-aws", ["linux-image-aws", "linux-headers-aws"],
     ("nvidia-headless-535-server", "nvidia-utils-535-server"), ("docker.io",), "ubuntu2204"),
    ("ubuntu-24.04", "6.8.0-45-generic", "linux-headers-6.8.0-45-generic",
     ["linux-image-generic", "linux-headers-generic"],
     ("nvidia-headless-535-server", "nvidia-utils-535-server"), ("docker.io",), "ubuntu2404"),
    ("debian-12", "6.1.0-27-cloud-amd64", "linux-headers-6.1.0-27-cloud-amd64",
     ["linux-image-cloud-amd64", "linux-headers-cloud-amd64"],
     ("nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced", "firmware-nvidia-gsp"),
     ("docker.io",), "debian12"),
    ("debian-11", "5.10.0-32-amd64", "linux-headers-5.10.0-32-amd64", ["linux-image-amd64", "linux-headers-amd64"],
     ("nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced", "firmware-nvidia-gsp"),
     ("docker.io",), "debian11"),
    ("rhel-9", "5.14.0-427.13.1.el9_4.x86_64", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64", ["kernel", "kernel-devel"],
     EL_DRIVER, DOCKER_CE, "rhel9"),
    ("rocky-8", "4.18.0-553.el8_10.x86_64", "kernel-devel-4.18.0-553.el8_10.x86_64", ["kernel", "kernel-devel"],
     EL_DRIVER, DOCKER_CE, "rhel8"),
    ("almalinux-9", "5.14.0-427.el9.x86_64", "kernel-devel-5.14.0-427.el9.x86_64", ["kernel", "kernel-devel"],
     EL_DRIVER, DOCKER_CE, "rhel9"),
    ("amzn-2023", "6.1.109-118.189.amzn2023.x86_64", "kernel-devel-6.1.109-118.189.amzn2023.x86_64",
     ["kernel", "kernel-devel", "kernel-modules-extra"], EL_DRIVER, ("docker",), "amzn2023"),
]


@pytest.mark.parametrize(("name", "kernel", "headers", "upgrade", "driver", "docker", "repo"), MATRIX)
def test_distro_matrix(name, kernel, headers, upgrade, driver, docker, repo):
    os = os_info(name)
    for_os(os).check_supported()
    assert for_os(os).headers_package(kernel) == headers
    assert for_os(os).newest_kernel_packages(kernel) == upgrade
    assert for_os(os).driver_packages("distro", 535, "proprietary").packages == driver
    assert for_os(os).docker_packages() == docker
    assert for_os(os).cuda_repo_name() == repo
    path, content = for_os(os).toolkit_repo_file(TOOLKIT_REPO)
    if os.family == "debian":
        assert path.endswith("nvidia-container-toolkit.list")
        assert content.startswith("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] ")
    else:
        assert path == "/etc/yum.repos.d/nvidia-container-toolkit.repo" and "gpgkey=" in content


def test_ubuntu_open_modules_and_fabric_manager_follow_the_branch():
    pkgs = for_os(os_info("ubuntu-22.04")).driver_packages("distro", 550, "open")
    assert pkgs.packages == ("nvidia-headless-550-server-open", "nvidia-utils-550-server")
    assert pkgs.fabricmanager == ("nvidia-fabricmanager-550", "libnvidia-nscq-550")
    cuda = for_os(os_info("ubuntu-22.04")).driver_packages("cuda-repo", 570, "open")
    assert cuda.packages == ("nvidia-open-570",) and "cuda-keyring_1.1-1_all.deb" in cuda.repo_setup
    el = for_os(os_info("rocky-9")).driver_packages("cuda-repo", 550, "proprietary")
    assert "dnf -y module install nvidia-driver:550-dkms" in el.repo_setup
    with pytest.raises(UnsupportedDistro):
        for_os(os_info("debian-12")).driver_packages("distro", 535, "open")


def test_amazon_linux_2_is_refused_with_the_way_to_al2023():
    with pytest.raises(UnsupportedDistro, match="end of support on 2026-06-30.*Amazon Linux 2023"):
        for_os(os_info("amzn-2")).check_supported()


def test_unsupported_versions_are_refused():
    ubuntu18 = parse_os_release('ID=ubuntu\nVERSION_ID="18.04"\nPRETTY_NAME="Ubuntu 18.04.6 LTS"\n')
    with pytest.raises(UnsupportedDistro, match="not supported"):
        for_os(ubuntu18).check_supported()


def test_kernel_flavours():
    assert kernel_flavour("6.1.0-27-cloud-amd64") == "cloud-amd64"
    assert kernel_flavour("6.8.0-1015-aws") == "aws"
    assert kernel_flavour("5.14.0-427.el9.x86_64") == ""
    assert kernel_flavour("6.18.44-fc-v657") == ""


@pytest.mark.parametrize(("ids", "branch", "forced", "flavor"), [
    (["0x1db4"], 535, "auto", "proprietary"),        # V100: pre-Turing
    (["0x1eb8"], 535, "auto", "proprietary"),        # T4 on R535: open is not the default yet
    (["0x20b2"], 570, "auto", "open"),               # A100 on R570
    (["0x2330", "0x1db4"], 570, "auto", "proprietary"),  # mixed: the old GPU decides
    (["0x2901"], 550, "auto", "open"),               # Blackwell needs open
    (["0x1db4"], 570, "open", "open"),               # forced
])
def test_open_or_proprietary_modules(ids, branch, forced, flavor):
    assert choose_kernel_modules(ids, branch, forced)[0] == flavor
