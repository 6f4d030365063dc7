"""NVIDIA's and Docker's package repositories, each fact with the vendor file it was read from.

The distro adapters (gpunode/distros/) build repository definitions and package lists from these values (see
gpunode/vendor_facts.py).
"""

from __future__ import annotations

from gpunode.vendor_facts import DEEPOPS, EKS_AMI, NVIDIA_DRIVER_ROLE, Fact, Pin, Source, fact_table

_DOCS = ("NVIDIA/cloud-native-docs", "container-toolkit/install-guide.md",
         "52dcb7b8d956784344e241df476de17094a4574c")
_LIBNV = "NVIDIA/libnvidia-container"  # its gh-pages content: the files the repository serves


def _guide(line: str) -> Source:
    return Source(_DOCS[0], _DOCS[1], _DOCS[2], line)


TOOLKIT = fact_table("nvidia-container-toolkit", {
    "repo_url": Fact("https://nvidia.github.io/libnvidia-container", _guide("45-48"),
                     "the production repository: its gpgkey, stable/deb and stable/rpm live under this address"),
    "apt_keyring": Fact("/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg", _guide("45"),
                        "the dearmored gpgkey; the list's deb lines get signed-by= this file (line 47)"),
    "apt_list": Fact("/etc/apt/sources.list.d/nvidia-container-toolkit.list", _guide("48")),
    "apt_line": Fact("{url}/stable/deb/$(ARCH) /", Source(
        _LIBNV, "stable/deb/nvidia-container-toolkit.list", "52a8c19578bf03e976b5432a0529591b784ca5b0", "1"),
        "the one enabled line of the list NVIDIA serves (the experimental one is commented out)"),
    "yum_repo": Fact("/etc/yum.repos.d/nvidia-container-toolkit.repo", _guide("97-98")),
    "yum_section": Fact("[nvidia-container-toolkit]\nname=nvidia-container-toolkit\n"
                        "baseurl={url}/stable/rpm/$basearch\nrepo_gpgcheck=1\ngpgcheck=0\nenabled=1\n"
                        "gpgkey={url}/gpgkey\n", Source(
                            _LIBNV, "stable/rpm/nvidia-container-toolkit.repo",
                            "0ae7307ac8b40cb0e09444dac9954dc1304369e8", "1-7"),
                        "the stable section of the .repo NVIDIA serves (an experimental section follows, disabled)"),
    "packages": Fact(("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                      "libnvidia-container1"), _guide("73-76"),
                     "installed together at one version (apt; the same four on dnf, lines 112-115)"),
    "cdi_refresh_since": Fact((1, 18), Source(_DOCS[0], "container-toolkit/cdi-support.md", _DOCS[2], "37"),
                              "from v1.18.0 the nvidia-cdi-refresh service generates and updates the CDI spec"),
    "cdi_dynamic_spec": Fact("/var/run/cdi/nvidia.yaml", Source(_DOCS[0], "container-toolkit/cdi-support.md",
                                                                _DOCS[2], "39")),
    "cdi_refresh_units": Fact(("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"), Source(
        _DOCS[0], "container-toolkit/cdi-support.md", _DOCS[2], "87-90"),
        "the .path unit watches the system and triggers the .service, which generates the spec"),
})

CUDA_REPO = fact_table("nvidia-cuda-repo", {
    "base_url": Fact("https://developer.download.nvidia.com/compute/cuda/repos/{repo}/{arch}",
        NVIDIA_DRIVER_ROLE.at("defaults/main.yml", "43"),
        "_ubuntu_repo_dir is <distro><version without dots>/<arch, aarch64 as sbsa> (vars/main.yml:1)"),
    "arm_arch": Fact("sbsa", NVIDIA_DRIVER_ROLE.at("vars/main.yml", "1"),
                     "aarch64 is replaced by sbsa in the repository folder"),
    "keyring_package": Fact("cuda-keyring_1.1-1_all.deb", DEEPOPS.at("roles/nvidia_cuda/defaults/main.yml", "30-31"),
        "downloaded from the repository folder and installed with dpkg (tasks/install-ubuntu.yml:9)"),
    "rpm_repo_file": Fact("{base}/cuda-{repo}.repo",
        EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "44"),
        "dnf config-manager --add-repo .../repos/amzn2023/<arch>/cuda-amzn2023.repo (NVIDIA/gpu-driver-container "
        "rhel10/install.sh@06a208c:197 adds cuda-rhel10.repo the same way)"),
    "amzn2023_folder": Fact("amzn2023", EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "44")),
    "rhel_folder": Fact("rhel{major}", DEEPOPS.at("docs/airgap/mirror-rpm-repos.md", "28"),
                        "repo files for EL8 and EL9 at repos/rhel8/x86_64/cuda-rhel8.repo and rhel9"),
})

# NVIDIA DCGM 4 (issue 38): the packages as Azure's HPC images install them from the CUDA repository, the distributions
# NVIDIA's DCGM guide lists. azhpc-images c709a9b (2026-05-05) is the last version that reads the CUDA major from
# nvidia-smi; 8e9d055 (the newest read) asks libcuda's cuDriverGetVersion instead (same number, no GPU needed).
_AZHPC = Pin("Azure/azhpc-images", "c709a9b297024e1e22229cf4d402794b903542ae")
_AZHPC_DCGM = "components/install_dcgm.sh"
_DCGM_GUIDE = "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html"
_DCGM_INSTALL = "https://docs.nvidia.com/datacenter/dcgm/latest/installation.html"

DCGM = fact_table("nvidia-dcgm", {
    "cuda_package": Fact("datacenter-gpu-manager-4-cuda{major}", _AZHPC.at(_AZHPC_DCGM, "22"),
                         "one package per CUDA major the driver supports (apt line 22, dnf line 51)"),
    "core_package": Fact("datacenter-gpu-manager-4-core", _AZHPC.at(_AZHPC_DCGM, "23"),
                         "installed beside it at the same version (apt-get install ...-cuda$V=$DCGM_VERSION "
                         "...-core=$DCGM_VERSION, lines 21-25)"),
    "cuda_major_probe": Fact("nvidia-smi | sed -E -n 's/.*CUDA Version: ([0-9]+)[.].*/\\1/p'",
                             _AZHPC.at(_AZHPC_DCGM, "7"),
                             "the major of the 'CUDA Version: X.Y' nvidia-smi prints: the newest CUDA the installed "
                             "driver supports"),
    "weak_deps": Fact(True, _AZHPC.at(_AZHPC_DCGM, "51"),
                      "dnf install --setopt=install_weak_deps=True: the recommended DCGM packages come along"),
    "service": Fact("nvidia-dcgm", _AZHPC.at(_AZHPC_DCGM, "63-66"),
                    "systemctl --now enable nvidia-dcgm, then systemctl is-active nvidia-dcgm must succeed"),
    "repository": Fact("the CUDA network repository", Source(url=_DCGM_INSTALL),
                       "'Confirm that the target platform is supported, satisfy the applicable requirements, "
                       "configure the NVIDIA package repository, and then use the package procedure for the "
                       "installed Linux distribution.' (the page's first sentence); azhpc-images adds no other: "
                       "'the repo is already added during nvidia/ cuda installations' (install_dcgm.sh:15)"),
    "distributions": Fact({"ubuntu": ("22.04", "24.04"), "debian": ("12",), "rhel": ("8", "9", "10"),
                           "rocky": ("8", "9", "10"), "almalinux": ("8", "9", "10"), "amzn": ("2023",)},
                          Source(url=_DCGM_GUIDE),
                          "'Supported Linux Distributions': Amazon Linux 2023, Azure Linux 3.0, Debian 12, RHEL "
                          "8.y/Rocky Linux 8.y, RHEL 9.y/Rocky Linux 9.y, RHEL 10.y/Rocky Linux 10.y, SLES/OpenSUSE "
                          "15.y, Ubuntu 22.04 LTS, Ubuntu 24.04 LTS. AlmaLinux as RHEL: azhpc-images installs DCGM "
                          "on it with dnf from the same repository (install_dcgm.sh@c709a9b:49-51). Azure Linux and "
                          "SLES have no gpunode adapter"),
})

_DOCKER_DOCS = ("docker/docs", "5ed1d6539fd5b2d03ad0a3f2f55a8774cd0c4021")
# The install pages as read again for issue 36 (the OS requirements lists): rhel.md and centos.md
_DOCKER_RHEL = Source("docker/docs", "content/manuals/engine/install/rhel.md",
                      "02d940447f8d3b5ee862773973c72194eb236d4e", "28-33",
                      "https://docs.docker.com/engine/install/rhel/")


def _docker(page: str, line: str) -> Source:
    return Source(_DOCKER_DOCS[0], f"content/manuals/engine/install/{page}.md", _DOCKER_DOCS[1], line)


DOCKER = fact_table("docker", {
    "rhel_repo_base": Fact("https://download.docker.com/linux/rhel", _docker("rhel", "18"),
                           "download-url-base of the RHEL page; docker-ce.repo is added from it (93)"),
    "rhel_maintained": Fact((8, 9, 10), _DOCKER_RHEL,
                            "'Docker Engine requires a maintained version of RHEL': RHEL 8 and 9 on that page, RHEL 10 "
                            "added by docker/docs pull request 23491 (2025-10-03). The CentOS page lists only CentOS "
                            "Stream 9 (centos.md@26aaea63a4db491c05d6b535d9749bf492898a76:29-32) and "
                            "Stream 10 (pull request 23532, 2025-10-09): its el8 tree is no longer maintained, so "
                            "gpunode uses the RHEL tree for every EL-compatible host (Rocky, Alma, Alibaba Cloud "
                            "Linux 3, TencentOS)"),
    "ce_packages": Fact(("docker-ce", "docker-ce-cli", "containerd.io"), _docker("rhel", "106"),
                        "the first three of the packages the page installs (the buildx and compose plugins follow; "
                        "gpunode does not install them)"),
})

TOOLKIT_PACKAGES: tuple[str, ...] = TOOLKIT["packages"].value
TOOLKIT_REPO: str = TOOLKIT["repo_url"].value
TOOLKIT_KEYRING: str = TOOLKIT["apt_keyring"].value
# Old nvidia-docker / libnvidia-container list files without signed-by; next to the new one they make apt fail
# with "Conflicting values set for option Signed-By".
STALE_TOOLKIT_LISTS = ("/etc/apt/sources.list.d/nvidia-docker.list", "/etc/apt/sources.list.d/libnvidia-container.list")
DOCKER_CE_PACKAGES: tuple[str, ...] = DOCKER["ce_packages"].value
