"""NVIDIA driver facts that hold on every distro, each with the vendor file or page it was read from (see
gpunode/vendor_facts.py; the distro-specific ones live in the adapters, gpunode/distros/).

The nvidia_driver step reads these values from here; a reviewer re-checks one by opening the file at the commit and
line given.
"""

from __future__ import annotations

from gpunode.vendor_facts import DEEPOPS, GPU_DRIVER_CONTAINER, NVIDIA_DRIVER_ROLE, Fact, Source, fact_table

_INSTALLER = "00aaa9f9b4677d606a1897c5554d9c93e5870980"

NVIDIA = fact_table("nvidia-driver", {
    "persistenced_unit": Fact("nvidia-persistenced", NVIDIA_DRIVER_ROLE.at("tasks/main.yml", "38-42")),
    "fabricmanager_unit": Fact("nvidia-fabricmanager", DEEPOPS.at("roles/nvidia-dgx/vars/redhat.yml", "119-120"),
        "deepops starts and enables it (state: started, tasks/redhat-el8-plus.yml:140-147)"),
    "start_after_load": Fact("modprobe nvidia, then nvidia-persistenced, then the fabric manager",
        GPU_DRIVER_CONTAINER.at("ubuntu22.04/nvidia-driver", "372-384"),
        "_load_driver loads the modules and calls _start_daemons (688: persistenced, 731: nv-fabricmanager)"),
    "reboot_after_install": Fact(True, NVIDIA_DRIVER_ROLE.at("tasks/main.yml", "50-52"),
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
