"""Distro and NVIDIA driver facts, each with the vendor file or page it was read from (see gpunode/vendor_facts.py).

The nvidia_driver step and the package-manager adapters read these values from here; a reviewer re-checks one by
opening the file at the commit and line given.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Source, fact_table

_UBUNTU_PKG = "canonical/nvidia-graphics-drivers"
_UBUNTU_570 = "85e3f828ccae56e6b09e5f37a3758d1b5597393b"  # branch 570-server
_UBUNTU_580 = "a65eb85c09dca2638ea471320345b201c5a7032c"  # branch 580-server
_UBUNTU_570_JAMMY = "f57ac99f954ec75060c041ccf50e2999081af4c4"  # branch 570-server-jammy
_UBUNTU_580_JAMMY = "fa6a075f873691b0f055ee43e5501aa826b512a8"  # branch 580-server-jammy
_ROLE = ("NVIDIA/ansible-role-nvidia-driver", "f68d4a709d4a8c25c9d951538e35740174d3db91")
_DEEPOPS = "3957a42fb9af0b09c91b6d2ac9dc7925daf00523"
_DRIVER_CONTAINER = "06a208ca9747c82b1ba99b76ecdcf2469b0a0207"
_INSTALLER = "00aaa9f9b4677d606a1897c5554d9c93e5870980"
_EKS = "81fec2e895854f599974fe4d3d72f61c0a9aaffa"
_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/advanced-options.html"

UBUNTU = fact_table("ubuntu", {
    "headless_package": Fact("nvidia-headless-{branch}-server{open}", Source(
        *_ROLE[:1], "defaults/main.yml", _ROLE[1], "32-37"),
        "the role installs nvidia-headless-<branch> and nvidia-utils-<branch> with the suffix -server"),
    "utils_package": Fact("nvidia-utils-{branch}-server", Source(*_ROLE[:1], "defaults/main.yml", _ROLE[1], "37")),
    "dkms_module": Fact("nvidia-srv", Source(_UBUNTU_PKG, "debian/templates/dkms_nvidia.conf.in", _UBUNTU_570, "1"),
                        "PACKAGE_NAME of the -server proprietary DKMS package: `dkms status` lists nvidia-srv/<ver> "
                        "(same in the 535-, 550- and 580-server branches)"),
    "dkms_module_open": Fact("nvidia", Source(_UBUNTU_PKG, "debian/templates/dkms_nvidia_open.conf.in", _UBUNTU_570,
                                              "1"), "the -server-open DKMS package registers as plain nvidia"),
    "headless_provides": Fact("nvidia-headless", Source(_UBUNTU_PKG, "debian/control", _UBUNTU_580, "205-213"),
                              "every nvidia-headless-<branch>-server Conflicts/Provides/Replaces nvidia-headless: "
                              "one branch at a time, so a held old branch blocks the new one"),
    # Server branches Canonical ended: every package of the branch is a transitional (oldlibs) package that depends
    # on the next branch's, so installing `nvidia-headless-<old>-server` installs the next branch. Same on focal and
    # noble (550-server-focal@99cce95, 550-server-noble@4738992, 570-server-focal@3ce9590, 570-server-noble@d27e751).
    "server_transitional": Fact({550: 570, 570: 580}, Source(_UBUNTU_PKG, "debian/control", _UBUNTU_570_JAMMY, "84-89"),
                                "nvidia-headless-570-server: Section non-free/oldlibs, Depends nvidia-headless-580-"
                                "server, 'Transitional package for upgrades' (changelog 570.211.01-0ubuntu1.22.04.1: "
                                "Transition EOL 570 drivers to 580, LP: #2147038); 550-server-jammy@8390362 "
                                "debian/control:84-89 makes nvidia-headless-550-server depend on the 570 one "
                                "(LP: #2114726)"),
    "server_live": Fact((535, 580), Source(_UBUNTU_PKG, "debian/control", _UBUNTU_580_JAMMY, "204-214"),
                        "nvidia-headless-580-server is a real metapackage (Depends no-dkms + dkms of 580); so is "
                        "nvidia-headless-535-server (535-server-jammy@f9c1433 debian/control:200-209); Canonical's own "
                        "AWS guide installs nvidia-headless-580-server nvidia-utils-580-server "
                        "(canonical/ubuntu-cloud-docs "
                        "docs/aws/aws-how-to/instances/install-nvidia-drivers.rst@9a500e6:85)"),
})

EL = fact_table("el", {
    "crb_subscription": Fact("codeready-builder-for-rhel-{el}-{arch}-rpms", Source(
        "NVIDIA/deepops", "roles/nvidia-dgx/vars/redhat.yml", _DEEPOPS, "25-29"),
        "enabled with `subscription-manager repos --enable` (roles/nvidia-dgx/tasks/redhat-el8-plus.yml:15-21)"),
    "crb_rhui": Fact("codeready-builder-for-rhel-{el}-rhui-rpms", Source(
        "aws/aws-parallelcluster-cookbook",
        "cookbooks/aws-parallelcluster-shared/resources/package_repos/package_repos_redhat8.rb",
        "f75d84c38ecfac1891e5f3e8fe2d424cc3e7448d", "36-39"),
        "RHEL on AWS (RHUI, pay-as-you-go) enables CodeReady Builder with yum-config-manager, not "
        "subscription-manager"),
    "epel_release_rpm": Fact("https://dl.fedoraproject.org/pub/epel/epel-release-latest-{el}.noarch.rpm", Source(
        *_ROLE[:1], "defaults/main.yml", _ROLE[1], "14")),
    "module_switch": Fact("dnf -y module switch-to nvidia-driver:{stream} --allowerasing", Source(url=_GUIDE),
                          "NVIDIA's guide, 'Switching between Driver Module Flavors', EL 8/9 and Amazon Linux 2023"),
    "module_stream": Fact("{branch}-dkms", Source(*_ROLE[:1], "tasks/install-redhat.yml", _ROLE[1], "75-77"),
                          "the role installs @nvidia-driver:<branch>-dkms"),
    "module_stream_open": Fact("{branch}-open", Source(
        url="https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/620/kernel-modules.html"),
        "dnf module enable nvidia-driver:<branch>-open (EL 8/9, Amazon Linux 2023)"),
    "open_dkms_renamed_in": Fact("570.148.08", Source(
        "awslabs/amazon-eks-ami", "templates/al2023/provisioners/install-nvidia-driver.sh", _EKS, "127"),
        "the RPM open module is registered as nvidia-open before this version, nvidia from it on"),
})

NVIDIA = fact_table("nvidia-driver", {
    "persistenced_unit": Fact("nvidia-persistenced", Source(*_ROLE[:1], "tasks/main.yml", _ROLE[1], "38-42")),
    "fabricmanager_unit": Fact("nvidia-fabricmanager", Source(
        "NVIDIA/deepops", "roles/nvidia-dgx/vars/redhat.yml", _DEEPOPS, "119-120"),
        "deepops starts and enables it (state: started, tasks/redhat-el8-plus.yml:140-147)"),
    "start_after_load": Fact("modprobe nvidia, then nvidia-persistenced, then the fabric manager", Source(
        "NVIDIA/gpu-driver-container", "ubuntu22.04/nvidia-driver", _DRIVER_CONTAINER, "372-384"),
        "_load_driver loads the modules and calls _start_daemons (688: persistenced, 731: nv-fabricmanager)"),
    "reboot_after_install": Fact(True, Source(*_ROLE[:1], "tasks/main.yml", _ROLE[1], "50-52"),
                                 "the role reboots after a driver install changed something"),
    "runfile_no_nouveau_check": Fact("--no-nouveau-check", Source(
        "NVIDIA/nvidia-installer", "option_table.h", _INSTALLER, "490-492"),
        "silent mode otherwise answers ABORT to the nouveau check (misc.c:2494-2586)"),
    "runfile_skip_module_load": Fact("--skip-module-load", Source(
        "NVIDIA/nvidia-installer", "option_table.h", _INSTALLER, "165-167"),
        "what the installer itself sets when it continues past nouveau (misc.c:2584): no test load while nouveau "
        "holds the GPU"),
})

ALINUX = fact_table("alinux", {
    "releasever_adapter": Fact("dnf-plugin-releasever-adapter", Source(
        url="https://help.aliyun.com/zh/ecs/use-cases/install-and-use-docker-on-a-linux-ecs-instance"),
        "Alibaba's dnf repository compatibility plugin for Alibaba Cloud Linux 3: repositories written for EL 8 "
        "($releasever) work there"),
    "adapter_repo": Fact("alinux3-plus", Source(
        url="https://help.aliyun.com/zh/ecs/use-cases/install-and-use-docker-on-a-linux-ecs-instance"),
        "dnf -y install dnf-plugin-releasever-adapter --repo alinux3-plus"),
})

AL2023 = fact_table("al2023", {
    "kernel_lines": Fact({"6.12": "kernel6.12", "6.18": "kernel6.18"}, Source(
        "awslabs/amazon-eks-ami", "templates/al2023/provisioners/install-nvidia-driver.sh", _EKS, "99-106"),
        "the kernel package line of the running kernel: kernel, or kernel6.12/kernel6.18 for those releases "
        "(gpunode reads the line from the RPM owning /lib/modules/<running>, scripts/facts.sh: the same answer "
        "without matching release numbers)"),
    "build_suffixes": Fact(("-devel", "-modules-extra"), Source(
        "awslabs/amazon-eks-ami", "templates/al2023/provisioners/install-nvidia-driver.sh", _EKS, "108-112"),
        "installed for the driver build: <line>-devel and <line>-modules-extra (with -headers and "
        "-modules-extra-common, which the first two do not need for a DKMS build: gpunode leaves them to dnf)"),
})
