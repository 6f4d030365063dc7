"""NVRM / module-loader conditions in kernel messages (besides Xid), each with what to do about it."""

from __future__ import annotations

import re
from typing import NamedTuple

from gpunode.parsers.model import Severity


class KernelCondition(NamedTuple):
    """A kernel-message form of a known fault."""

    id: str
    pattern: re.Pattern[str]
    severity: Severity
    summary: str
    remedy: str


_I = re.IGNORECASE
CONDITIONS: tuple[KernelCondition, ...] = (
    KernelCondition(
        "nvidia-device-claimed",
        re.compile(r"NVIDIA probe routine was not called|No NVIDIA (?:graphics adapter|devices) probed|"
                   r"NVRM: GPU \S+ is already bound to \S+", _I), "critical",
        "the nvidia module found no GPU to drive: another driver (usually nouveau) owns the device",
        "Blacklist nouveau (`echo 'blacklist nouveau' > /etc/modprobe.d/blacklist-nouveau.conf`, plus "
        "`options nouveau modeset=0`), rebuild the initramfs (`update-initramfs -u` / `dracut -f`) and reboot; "
        "check `lspci -k -d 10de:` shows `Kernel driver in use: nvidia`. Also unbind vfio-pci if the GPU is "
        "reserved for passthrough."),
    KernelCondition(
        "nouveau-bound",
        re.compile(r"\bnouveau\s+(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]:\s*(?:Detected an NV|NVIDIA \S+ \(|"
                   r"bios:|DRM:|fb\d|BIT BIOS found|Bios version)", _I), "critical",
        "the nouveau driver drives the NVIDIA GPU (the nvidia driver cannot use it)",
        "Blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in "
        "/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs (`update-initramfs -u` / `dracut -f`), "
        "reboot, and check `lspci -k -d 10de:` shows `Kernel driver in use: nvidia`."),
    KernelCondition(
        "nvidia-no-adapter",
        re.compile(r"No NVIDIA graphics adapter found|NVIDIA init module failed|None of the NVIDIA "
                   r"(?:graphics adapters|devices) were initiali[sz]ed|The NVIDIA probe routine failed for \d+ device"
                   r"|No NVIDIA GPU found",
                   _I), "critical",
        "the nvidia module found no NVIDIA GPU it can drive and did not load",
        "Check `lspci -nn | grep -i 10de` shows the GPU (passthrough configured, card seated and powered) and "
        "that the installed driver branch supports it; on hosts without an NVIDIA GPU, remove the driver or "
        "stop loading the module."),
    KernelCondition(
        "rm-init-failed",
        re.compile(r"NVIDIA\((?:GPU-)?\d+\): Failed to initialize the NVIDIA GPU at PCI:", _I), "critical",
        "the X server could not initialise an NVIDIA GPU (the kernel driver failed to bring it up)",
        "Xorg (or bumblebeed's X server) reports the kernel driver's failure: find the matching `NVRM: "
        "RmInitAdapter failed` / `rm_init_adapter failed` lines in `dmesg`, check the driver branch supports "
        "the GPU, that no other driver (nouveau, vfio-pci) holds it, and on laptops with a switchable GPU that "
        "it is powered (bbswitch/prime); then reload the module or reboot."),
    KernelCondition(
        "gpu-reset-required",
        re.compile(r"NV_ERR_RESET_REQUIRED|GPU requires reset|Reset required \[|recovery action changed from .* "
                   r"to 0x1 \(GPU Reset Required\)", _I), "critical",
        "the driver reports that a GPU must be reset before it can be used again",
        "Drain the GPU, then reset it (`nvidia-smi -r -i <gpu>`, persistence mode off first) or reboot the node; "
        "if it recurs, collect `nvidia-bug-report.sh` and follow NVIDIA's Xid guidance for the preceding errors."),
    KernelCondition(
        "fabricmanager-no-nvswitch",
        re.compile(r"request to query NVSwitch device information from NVSwitch driver failed with "
                   r"error:WARNING Nothing to do \[NV_WARN_NOTHING_TO_DO\]", _I), "warning",
        "nvidia-fabricmanager runs on a system without NVSwitch and exits (NV_WARN_NOTHING_TO_DO)",
        "Fabric manager is only for NVSwitch systems (HGX/DGX A100/H100/B200 baseboards); PCIe GPUs and "
        "NVLink-bridged pairs (A40, 4090, ...) do not use it: `systemctl disable --now nvidia-fabricmanager`. "
        "On a real NVSwitch system, check the nvidia-nvswitch module is loaded and the driver and "
        "fabricmanager versions match."),
    KernelCondition(
        "nvswitch-sxid",
        re.compile(r"nvidia-nvswitch\d*: SXid \(PCI:[^)]*\): \d+", _I), "warning",
        "an NVSwitch reported an SXid error (NVLink fabric)",
        "Look the SXid up in NVIDIA's SXid catalog (Fabric Manager user guide): fatal SXids stall NVLink "
        "traffic (GPUs then log Xid 45/74) and need the GPUs/NVSwitches reset (reboot the node); repeated "
        "non-fatal ones on one port point at the link (reseat / RMA the baseboard)."),
    KernelCondition(
        "driver-library-mismatch",
        re.compile(r"NVRM: API mismatch: the client .*?has the version \S+, but this kernel module has the "
                   r"version \S+", _I), "critical",
        "a driver client and the loaded kernel module are different driver versions (kernel API mismatch)",
        "The user-space driver was upgraded while the old kernel module stays loaded (or DKMS built another "
        "version): compare `cat /proc/driver/nvidia/version` and `modinfo -F version nvidia` with the "
        "installed packages, then reboot (or reload the modules when no GPU process runs). Hold the driver "
        "packages so it cannot recur."),
    KernelCondition(
        "module-load-rejected",
        re.compile(r"Lockdown: .*unsigned module|Loading of unsigned module is rejected|Key was rejected by "
                   r"service|could not insert 'nvidia[\w-]*': (?:Operation not permitted|Key was rejected)"
                   r"|module verification failed.*(?:rejected|Operation not permitted)", _I), "critical",
        "the kernel refuses unsigned modules (Secure Boot / lockdown): an unsigned NVIDIA module cannot load",
        "Check `mokutil --sb-state`. Either sign the module with an enrolled key (DKMS: enroll "
        "/var/lib/dkms/mok.pub with `mokutil --import` and confirm at the next boot), use the distribution's "
        "signed precompiled modules (e.g. linux-modules-nvidia-*), or disable Secure Boot in firmware."),
    KernelCondition(
        "module-unknown-symbol",
        re.compile(r"^(?:nvidia[\w-]*|nv_peer_mem|gdrdrv): (?:Unknown symbol|disagrees about version of symbol)",
                   _I | re.M),
        "critical",
        "an NVIDIA kernel module does not fit the running kernel (unknown or mismatched symbols)",
        "The module was built for another kernel or against another nvidia.ko: reinstall the headers for "
        "`uname -r`, rebuild (`dkms autoinstall -k $(uname -r)`, or reinstall the driver/GDS packages of "
        "the same version as the loaded nvidia module), run `depmod -a` and reload."),
    KernelCondition(
        "gsp-error",
        re.compile(r"Timeout waiting for RPC from GSP|Cannot initialize GSP firmware RM|kflcnCoreDump"
                   r"|failed to wait for GFW boot|RmFetchGspRmImages: No firmware image found"
                   r"|_kgspRpcRecvPoll|GSP RPC timeout", _I), "critical",
        "the GPU System Processor (GSP) firmware failed or timed out",
        "Reset the GPU (`nvidia-smi -r`) after draining it, power-cycle the node if it persists; make sure "
        "the GSP firmware files of the exact driver version are installed (/lib/firmware/nvidia/<version>/), "
        "try a newer driver branch, or (proprietary module, pre-Blackwell) `NVreg_EnableGpuFirmware=0`."),
    KernelCondition(
        "gpu-unsupported-by-module",
        re.compile(r"not supported by open nvidia\.ko|Open nvidia\.ko is only ready for use on Data Center"
                   r"|is not supported by the (?:NVIDIA )?\S+ (?:NVIDIA )?(?:Linux )?(?:graphics )?driver release"
                   r"|not supported by this driver|supported through the NVIDIA \S+ Legacy drivers"
                   r"|NVIDIA driver will ignore this GPU", _I),
        "critical",
        "the installed kernel module flavour or branch does not support this GPU",
        "Install the module flavour the GPU needs: the proprietary module for pre-Turing GPUs (no GSP), the "
        "open module for Blackwell, or a driver branch new enough for the GPU (see NVIDIA's supported "
        "products list); then reboot."),
    KernelCondition(
        "nouveau-loaded",
        re.compile(r"^nouveau(?: +\[ *\w+\]\[| [0-9a-f]{4}:[0-9a-f]{2}:)|\[drm\] Initialized nouveau|"
                   r"nouveaudrmfb|Kernel driver in use: nouveau", _I | re.M), "critical",
        "the nouveau driver is bound to the NVIDIA GPU (the kernel log shows it driving the device)",
        "Blacklist nouveau: write `blacklist nouveau` and `options nouveau modeset=0` to "
        "/etc/modprobe.d/blacklist-nouveau.conf, rebuild the initramfs (`update-initramfs -u` or `dracut -f`) and "
        "reboot; then check `lspci -k -d 10de:` shows `Kernel driver in use: nvidia`."),
    KernelCondition(
        "pcie-aer-uncorrectable",
        re.compile(r"PCIe Bus Error: severity=Uncorrect|AER: Uncorrect(?:ed|able) \(?(?:Fatal|Non-Fatal)", _I),
        "critical", "the kernel logged uncorrectable PCIe (AER) errors",
        "Uncorrectable PCIe errors precede a GPU falling off the bus: find the device named in the AER lines "
        "(`lspci -s <slot>`), reseat the GPU and riser, check the slot's generation setting in the BIOS, and RMA "
        "the card or riser if the errors recur."),
    KernelCondition(
        "pcie-aer-correctable",
        re.compile(r"PCIe Bus Error: severity=Corrected|AER: Corrected error received|\bBadTLP\b|\bBadDLLP\b"
                   r"|\bRxErr\b", _I),
        "warning", "the kernel logged correctable PCIe (AER) errors (bad TLPs/DLLPs, receiver errors)",
        "Correctable errors are retried by the link but show a marginal connection: check their rate in `dmesg`, "
        "reseat the GPU/riser, try the slot one PCIe generation lower; replace the riser or card if they keep "
        "counting."),
)
