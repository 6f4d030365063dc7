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
_UBUNTU_DRIVERS = ("canonical/ubuntu-drivers-common", "d3d785609b864f39ddce16098c9a64f3ff79057e")
_PRECOMPILED_KMOD = ("NVIDIA/yum-packaging-precompiled-kmod", "a66bc1285b9c40276273c333e9ac05ac52bc83dd")
_DKMS_NVIDIA = ("NVIDIA/yum-packaging-dkms-nvidia", "b28ed69631673c076b797caeec5fd83c452a6f61")
_DKMS = ("dell/dkms", "793fdab5eba9d6b6e9295b18e44a23824e7da44f")
_ECS = ("aws/amazon-ecs-ami", "a2532d3503f2052a09ac18189b0de33918406db8")

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
    # Precompiled first (issue 30): Canonical's signed modules for the running kernel, DKMS only where there are none.
    "precompiled_first": Fact(True, Source(*_UBUNTU_DRIVERS[:1], "UbuntuDrivers/detect.py", _UBUNTU_DRIVERS[1],
                                           "2085-2158"),
                              "get_linux_modules_metapackage takes linux-modules-nvidia-<flavour>-<kernel ABI> when "
                              "the archive has it for the running kernel, and falls back to nvidia-dkms-<flavour> "
                              "only when it does not"),
    "headless_no_dkms_package": Fact("nvidia-headless-no-dkms-{branch}-server{open}", Source(
        _UBUNTU_PKG, "debian/control", _UBUNTU_580, "186-196"),
        "the driver without nvidia-dkms (-open variant: lines 476-485); gpu-driver-container's precompiled "
        "ubuntu22.04/nvidia-driver:413 installs it"),
    "precompiled_modules": Fact("linux-modules-nvidia-{branch}-server{open}-{kernel}", Source(
        "NVIDIA/gpu-driver-container", "ubuntu22.04/precompiled/nvidia-driver", _DRIVER_CONTAINER, "421-431"),
        "the precompiled modules for exactly the running kernel (open: ...-server-open-<kver>)"),
    "precompiled_objects": Fact("linux-objects-nvidia-{branch}-server-{kernel}", Source(
        "NVIDIA/gpu-driver-container", "ubuntu22.04/precompiled/nvidia-driver", _DRIVER_CONTAINER, "428-431"),
        "installed with the proprietary modules only"),
    "precompiled_signatures": Fact("linux-signatures-nvidia-{kernel}", Source(
        "NVIDIA/gpu-driver-container", "ubuntu24.04/precompiled/nvidia-driver", _DRIVER_CONTAINER, "435-439"),
        "Canonical's Secure Boot signatures for the modules; not published for arm64 (amd64 only there)"),
    "dkms_make_jobs": Fact("-j$PROCS_NUM", Source(_UBUNTU_PKG, "debian/templates/dkms_nvidia.conf.in", _UBUNTU_580,
                                                  "8-9"),
                           "Canonical's DKMS packages already build with all the processors DKMS counts (the -open "
                           "template has the same line): nothing to change on Ubuntu"),
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
    # Precompiled streams (issue 30): `nvidia-driver:<branch>` next to `<branch>-dkms`, proprietary modules only.
    "precompiled_stream": Fact("{branch}", Source(*_PRECOMPILED_KMOD[:1], "README.md", _PRECOMPILED_KMOD[1],
                                                  "53-87"),
                               "streams latest and XXX hold precompiled kmod packages, latest-dkms and XXX-dkms the "
                               "DKMS ones; XXX locks the driver to branch XXX"),
    "precompiled_kmod": Fact("kmod-nvidia-{version}-{kernel}-{release}", Source(
        *_PRECOMPILED_KMOD[:1], "dnf-kmod-nvidia.spec", _PRECOMPILED_KMOD[1], "63"),
        "one package per driver version and kernel (kernel 4.18.0, release 147.5.1 of uname -r "
        "4.18.0-147.5.1.el8_1.x86_64); it requires exactly that kernel (line 98) and conflicts with "
        "kmod-nvidia-latest-dkms (line 99)"),
    "dkms_make_proprietary": Fact(
        "'make' -j2 module SYSSRC=${kernel_source_dir} IGNORE_XEN_PRESENCE=1 IGNORE_PREEMPT_RT_PRESENCE=1 "
        "IGNORE_CC_MISMATCH=1", Source(*_DKMS_NVIDIA[:1], "dkms-nvidia.conf", _DKMS_NVIDIA[1], "5"),
        "MAKE[0] of kmod-nvidia-latest-dkms: two jobs whatever the machine (the quoted 'make' keeps DKMS from adding "
        "its own -j, dell/dkms dkms.in:1462); the open flavour's dkms-open-nvidia.conf:5 runs `make -j` already"),
    "dkms_conf_override": Fact("/etc/dkms/{module}.conf", Source(*_DKMS[:1], "dkms.in", _DKMS[1], "629-640"),
                               "DKMS sources /etc/dkms/<module>.conf after the package's dkms.conf, in a subshell "
                               "(safe_source, 540-563), so its MAKE[0] replaces the package's"),
    "dkms_all_cores": Fact("-j$(nproc)", Source(*_ECS[:1], "scripts/al2023/gpu/install-nvidia-driver.sh", _ECS[1],
                                                "14-17"),
                           "the ECS GPU AMI writes MAKE[0] with -j$(nproc --all) to /etc/dkms/nvidia.conf (and removes "
                           "it before the image is taken, 242-244, since the count is written out); awslabs/amazon-eks-"
                           "ami templates/al2023/provisioners/install-nvidia-driver.sh:96-97 does the same"),
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
    "runfile_dkms_jobs": Fact("--concurrency-level (default: the detected CPUs)", Source(
        "NVIDIA/nvidia-installer", "option_table.h", _INSTALLER, "644-647"),
        "the runfile writes its dkms.conf with __JOBS replaced by that level (files.c:2130-2138): its DKMS builds "
        "use all cores already, nothing to change for method runfile"),
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
