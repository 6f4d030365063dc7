"""NVIDIA driver facts that hold on every distro, each with the vendor file or page it was read from (see
gpunode/vendor_facts.py; the distro-specific ones live in the adapters, gpunode/distros/).

The nvidia_driver step reads these values from here; a reviewer re-checks one by opening the file at the commit and
line given.
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
