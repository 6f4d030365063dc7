"""Whose evidence a line is: NVIDIA's only when it says so; AMD's, Intel's and other devices' never NVIDIA's.

A kernel message names its emitter: dev_printk() puts "<driver> <bus id>: " in front of it (`amdgpu 0000:03:00.0:`,
`i915 0000:00:02.0:`, `nvme nvme0:`), DRM's error macros write `[drm:<function> [<module>]]`, and pr_fmt() prefixes
(`NVRM:`, `mce:`, `EDAC MC1:`) name the subsystem. The recognisers below read those names first, then the wording of
the messages that carry none (amdgpu's "GPU reset begin!", i915's "GPU HANG: ecode"). Sources (format strings read
in the emitting code; torvalds/linux is read through the code index, its snapshot is over the fetch size limit):

- amdgpu: drivers/gpu/drm/amd/amdgpu/amdgpu_job.c @ 0014952b1754b0dba3ea87d2d3b9784fdcec9f95, amdgpu_job_timedout():
  line 122 "ring %s timeout, signaled seq=%u, emitted seq=%u", line 129 "Process information: process %s pid %d
  thread %s pid %d", line 139 "Starting %s ring reset"; drivers/gpu/drm/amd/amdgpu/amdgpu_device.c @
  f54d1867005c3323f5d8ad83eed823e84226c429, amdgpu_device_gpu_recover(): "GPU reset begin!", "VRAM is lost due to GPU
  reset!", "GPU reset succeeded, trying to resume", "GPU reset(%d) succeeded!".
- i915: drivers/gpu/drm/i915/i915_gpu_error.c @ 72f95afa5faaf899f7344879b6ccd5f0cb271b28, i915_capture_error_state()
  / error_msg(): "GPU HANG: ecode %d:%x:%08x"; "Resetting chip for %s" (i915_reset), "context reset due to GPU hang".
- CPU machine checks: arch/x86/kernel/cpu/mce/core.c @ 41ce0564bfe2e129d56730418d8c0a9f9f2d31b5 (pr_fmt "mce: ",
  HW_ERR "[Hardware Error]: ", "Machine check events logged"); drivers/edac/edac_mc.c @
  1b7f6a626f0ff511c3840678466cbfe1d62c0b29 ("EDAC MC%d: " prefix, "%d %s error(s) on %s").
- NVMe: drivers/nvme/host/pci.c @ e3ea126c513c93bc4af1d45044e34e3238ac0577 (dev_warn on the controller device,
  "nvme nvme%d: I/O tag %d (%04x) QID %d timeout, aborting"); NIC: net/sched/sch_generic.c @
  efd15f5f4ff63f6ac5d80850686e3d2cc8c4481b ("NETDEV WATCHDOG: %s (%s): transmit queue %u timed out").
- rocm-smi: its banner "ROCm System Management Interface" / "End of ROCm SMI Log"; xpu-smi: its command name and
  its `dump` header "GPU Utilization (%)" beside "DeviceId" (as the tools print them in ROCm/rocm_smi_lib#35,
  intel/xpumanager#69 captures, tests/data/captures/other/).

The diag-engine branch's message catalogue (gpunode/parsers/catalogs/messages.py, `foreign_vendor()`) holds the
same knowledge as catalogue entries; when it is there it is asked too, for lines these recognisers leave open.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

# NVIDIA says so: its kernel modules' prefixes, its PCI vendor id, its tools, its device names.
_NVIDIA = re.compile(
    r"\bNVRM\b|\bnvidia(?:[-_](?:modeset|uvm|drm|nvswitch|peermem|fs|fabricmanager|smi|container-cli|ctk|"
    r"persistenced|bug-report))?\b|\bnv-(?:fabricmanager|hostengine)\b|\bdcgmi?\b|\bS?Xid\b|\bNVSwitch|\bNVLink"
    r"|\b10de:|\bGeForce\b|\bQuadro\b|\bTesla\b|\bnouveau\b|\bNVML\b|\bCUDA\b|\bGSP\b", re.I)


class Foreign(NamedTuple):
    """A recogniser of another vendor's (or another device's) message."""

    vendor: str  # amd | intel | other
    what: str  # what it is, in words
    pattern: re.Pattern[str]
    prefix: bool = False  # it reads the driver's own dev_printk prefix: a line it matches is that driver's


_DEV = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
FOREIGN: tuple[Foreign, ...] = (
    Foreign("amd", "AMD GPU driver (amdgpu/radeon/amdkfd) messages", re.compile(
        rf"\b(?:amdgpu|radeon|kfd|amdxcp)\s+{_DEV}:|\[drm(?::\w+| ERROR :\w+)? \[(?:amdgpu|radeon)\]\]"
        r"|\[drm (?:ERROR|WARN|INFO)? ?:(?:amdgpu|gfx_v|sdma_v|mes_v|smu_v|psp_v|gmc_v)\w*\]|\bamdgpu:\s"
        r"|\[drm:(?:amdgpu|gfx_v\d+|sdma_v\d+|mes_v\d+|gmc_v\d+|dm_|amdgpu_dm)\w*", re.I), prefix=True),
    Foreign("amd", "AMD GPU reset / ring timeout messages (amdgpu's own words)", re.compile(
        r"\bring \S+ timeout, (?:signaled seq=\d+, emitted seq=\d+|but soft recovered)|GPU reset begin!"
        r"|VRAM is lost due to GPU reset|GPU reset succeeded, trying to resume|GPU reset\(\d+\) succeeded"
        r"|\b(?:BACO|MODE[12]) reset$|AMDGPU device coredump|PSP is resuming", re.I)),
    Foreign("amd", "rocm-smi / amd-smi output", re.compile(
        r"ROCm System Management Interface|End of ROCm SMI Log|\b(?:rocm|amd)-smi\b", re.I)),
    Foreign("intel", "Intel GPU driver (i915/xe) messages", re.compile(
        rf"\b(?:i915|xe)\s+{_DEV}:|\[drm:(?:i915|intel|gen\d|xe)_?\w*|\bdrm/i915\b|\[drm\] GPU HANG: ecode"
        r"|\bGPU HANG: ecode \d+:|Resetting chip (?:after gpu hang|for )|context reset due to GPU hang"
        r"|\[drm\] (?:stuck on \w+ ring|GuC |HuC |RC6 )", re.I), prefix=True),
    Foreign("intel", "xpu-smi output", re.compile(r"\bxpu-smi\b|^Timestamp, DeviceId, GPU ", re.I | re.M)),
    Foreign("other", "CPU machine-check / memory-controller (EDAC) errors", re.compile(
        r"\bmce: \[Hardware Error\]|Machine check events logged|\bEDAC (?:MC\d+|\w+ MC\d+|DEBUG|\w+):"
        r"|Machine Check Exception|\bmcelog\b", re.I)),
    Foreign("other", "NVMe storage messages", re.compile(
        r"\bnvme\s+nvme\d+:|\bnvme\d+n\d+(?:p\d+)?:|\bnvme\s+" + _DEV + ":", re.I), prefix=True),
    Foreign("other", "network interface messages", re.compile(
        r"NETDEV WATCHDOG:|\b(?:mlx[45]_core|ixgbe|i40e|ice|igb|igc|e1000e?|bnxt_en|tg3|r8169|ena|ionic|qede|"
        r"virtio_net|cxgb4|hns3|atlantic|iwlwifi|ath\d+k)\s+(?:" + _DEV + r"|\S+):", re.I), prefix=True),
)


class Attribution(NamedTuple):
    """Whose a line is: "nvidia", "amd", "intel", "other", or None (it does not say)."""

    vendor: str | None
    what: str | None = None


def line_vendor(line: str) -> Attribution:
    """Whose evidence one line (a kernel message, a tool's output line) is.

    A driver prefix decides first: `amdgpu 0000:03:00.0: ... GPU reset` is AMD's even with NVIDIA words in it;
    then NVIDIA's own names; then other vendors' wordings; else nobody's (None).
    """
    return _line_vendor(line)


@lru_cache(maxsize=8192)
def _line_vendor(line: str) -> Attribution:
    prefix = _foreign_prefix(line)
    if prefix is not None:
        return prefix
    if _NVIDIA.search(line):
        return Attribution("nvidia")
    for foreign in FOREIGN:
        if foreign.pattern.search(line):
            return Attribution(foreign.vendor, foreign.what)
    catalogued = _catalogue_vendor(line) if _WORTH_ASKING.search(line) else None
    return Attribution(catalogued, "catalogued message") if catalogued else Attribution(None)


def _foreign_prefix(line: str) -> Attribution | None:
    """The other vendor a driver-prefixed line names (amdgpu/i915/nvme/NIC drivers' dev_printk prefixes)."""
    for foreign in _PREFIXED:
        match = foreign.pattern.search(line)
        if match and not _NVIDIA_PREFIX.search(line[:match.start()]):
            return Attribution(foreign.vendor, foreign.what)
    return None


_NVIDIA_PREFIX = re.compile(r"\bNVRM:|\bnvidia[-\w]*:", re.I)
# the recognisers that read a driver's own prefix (a line they match is that driver's, whatever words follow)
_PREFIXED = tuple(f for f in FOREIGN if f.prefix)
# lines the message catalogue is asked about (its hundreds of patterns are not run on every line of a large log)
_WORTH_ASKING = re.compile(r"gpu|ring|reset|vram|hang|edac|mce|machine check|nvme|smi|drm|timeout|timed out", re.I)


def is_nvidia(line: str) -> bool:
    """True when the line says it is NVIDIA's."""
    return line_vendor(line).vendor == "nvidia"


def foreign(line: str) -> Attribution | None:
    """The other vendor a line belongs to (amd, intel, other), else None."""
    attribution = line_vendor(line)
    return attribution if attribution.vendor not in (None, "nvidia") else None


def _catalogue_vendor(line: str) -> str | None:
    """The message catalogue's vendor for a line that is not NVIDIA's (its amd, intel and other entries)."""
    from gpunode.parsers.catalogs.messages import foreign_vendor  # the catalogue is read on first use

    return foreign_vendor(line)
