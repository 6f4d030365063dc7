"""Meaning, severity and remedy of common NVIDIA Xid codes.

Wording follows NVIDIA's Xid documentation (descriptions, resolution buckets and trigger conditions):
  https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html  (Ampere and newer)
  https://docs.nvidia.com/deploy/xid-errors/archive/index.html          (Volta and older, e.g. Xid 61)
  https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html  (Xid 48/63/64 on older GPUs)
Resolution buckets are quoted in each remedy (RESTART_APP, RESET_GPU, RESTART_BM = reboot the node, ...).
"""

from __future__ import annotations

from typing import NamedTuple

from gpunode.parsers.catalogs.xid_nvidia import NVIDIA_XID_CATALOG
from gpunode.parsers.model import Severity

XID_DOC_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


class XidInfo(NamedTuple):
    """One catalog entry."""

    mnemonic: str
    name: str
    meaning: str
    remedy: str
    severity: Severity


XID_MEANINGS: dict[int, XidInfo] = {
    13: XidInfo(
        "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception",
        "General user application fault, typically an out-of-bounds access past the end of an array; could "
        "also be an illegal instruction or register. Rarely a hardware failure or system software bug.",
        "Immediate: RESTART_APP. Debug the application with cuda-gdb or Compute Sanitizer memcheck (or run "
        "with CUDA_DEVICE_WAITS_ON_EXCEPTION=1 and attach cuda-gdb); file a bug if inconclusive.",
        "warning"),
    31: XidInfo(
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault",
        "The MMU reported a fault, e.g. an illegal address access by a unit on the chip. Typically an "
        "application-level bug, but can also be a driver or hardware bug.",
        "Immediate: RESTART_APP. Debug the application with cuda-gdb or Compute Sanitizer memcheck; file a "
        "bug "
        "if inconclusive.",
        "warning"),
    43: XidInfo(
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing",
        "A user application hit a software induced fault and had to terminate. The GPU remains in a healthy "
        "state; in most cases this is an application error, not a driver bug.",
        "Immediate: IGNORE (the GPU is healthy). Investigate the application that was running; contact "
        "support "
        "if it recurs without an application cause.",
        "warning"),
    45: XidInfo(
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
        "The application was aborted and the kernel driver tore down its GPU work (Ctrl-C, GPU reset, "
        "SIGKILL, "
        "or a previous error such as a DBE). Usually a user or system action, not a bug.",
        "Follow the other Xid logged with it; if Xid 45 appears alone on an NVSwitch system, restart "
        "nvidia-fabricmanager (catalog: 'Solo: RESTART_FM').",
        "warning"),
    48: XidInfo(
        "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error",
        "The GPU detected an uncorrectable memory error; it is also reported to the application. A GPU reset "
        "or node reboot is needed to clear it.",
        "Drain the node, then reset the GPU or reboot. Check `nvidia-smi -q -d "
        "ECC,ROW_REMAPPER,PAGE_RETIREMENT`; "
        "if the SRAM threshold is exceeded (sram_threshold_exceeded) run field diagnostics and RMA.",
        "critical"),
    61: XidInfo(
        "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning (newer drivers)",
        "An internal micro-controller hit a breakpoint/warning (listed for Volta and older GPUs; unused on "
        "Ampere and newer).",
        "Drain and reset the GPU; report to NVIDIA support if it recurs.",
        "critical"),
    62: XidInfo(
        "PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)",
        "An internal micro-controller halted.",
        "Immediate: RESET_GPU (drain first). Contact support if it recurs.",
        "critical"),
    63: XidInfo(
        "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event / ECC page retirement recording event",
        "The GPU handled an ECC memory error: on Ampere and newer a row remapping was recorded, on older "
        "GPUs a "
        "page retirement was recorded in the InfoROM.",
        "Immediate: IGNORE. The remap/retirement takes effect at the next GPU reset or driver reload; reset "
        "the GPU when convenient.",
        "warning"),
    64: XidInfo(
        "INFOROM_DRAM_RETIREMENT_FAILURE",
        "GPU memory remapping failure / ECC page retirement recording failure",
        "The GPU handled an ECC memory error but failed to record the row remapping (or page retirement).",
        "Immediate: RESET_GPU (drain first). Contact support/RMA if it recurs.",
        "critical"),
    68: XidInfo(
        "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception",
        "Video decoder (NVDEC0) exception.",
        "Immediate: RESTART_APP. Contact support if it recurs.",
        "warning"),
    69: XidInfo(
        "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error",
        "Graphics engine class error.",
        "Immediate: RESTART_APP. Check the application/CUDA version (CHECK_APP/CUDA).",
        "warning"),
    74: XidInfo(
        "NVLINK_ERROR", "NVLINK Error",
        "A problem with an NVLink connection from the GPU to another GPU or NVSwitch. May be a failure of "
        "the "
        "link itself or of the device at the remote end.",
        "A GPU reset or node reboot is needed. Inspect `nvidia-smi nvlink -s` / `nvidia-smi nvlink -e`; if "
        "it "
        "repeats after reset/reboot, contact the hardware vendor.",
        "critical"),
    79: XidInfo(
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
        "The driver tried to access the GPU over PCI Express and found it inaccessible, often because of a "
        "hardware failure on the PCIe link; may also be failing GPU hardware or a driver issue.",
        "Immediate: RESTART_BM (reboot the node). Review system event logs and kernel PCI/AER logs for link "
        "failures; check seating, riser and power; contact support if it recurs.",
        "critical"),
    92: XidInfo(
        "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate",
        "The GPU sees a high rate of correctable (single-bit) ECC errors.",
        "Immediate: IGNORE. Watch the ECC counters; contact support if the rate persists.",
        "warning"),
    94: XidInfo(
        "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error",
        "An error (e.g. uncorrectable ECC) was contained to one application, which must be restarted; other "
        "applications are unaffected.",
        "Immediate: RESTART_APP. Reset the GPU when convenient; applications can run until then.",
        "warning"),
    95: XidInfo(
        "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error",
        "An error (e.g. uncorrectable ECC) could not be contained and affects multiple applications.",
        "Immediate: RESET_GPU (drain first). The GPU must be reset before applications can restart.",
        "critical"),
    119: XidInfo(
        "GSP_RPC_TIMEOUT", "GSP RPC Timeout",
        "A timeout occurred waiting for the GSP core of the GPU to respond to an RPC message.",
        "Immediate: RESET_GPU (drain first); power-cycle the node if it persists, then follow NVIDIA's GPU "
        "debug guidelines. Check for a newer driver branch (INVESTIGATE_SW).",
        "critical"),
    120: XidInfo(
        "GSP_ERROR", "GSP Error",
        "An error occurred in code running on the GSP core of the GPU.",
        "Immediate: RESET_GPU (drain first); power-cycle the node if it persists, then follow NVIDIA's GPU "
        "debug guidelines (INVESTIGATE_SW).",
        "critical"),
    121: XidInfo(
        "C2C_ERROR", "C2C Error",
        "Corrected errors on the C2C NVLink connection to a Grace CPU; corrected by the system with no "
        "operational impact.",
        "Immediate: IGNORE. Reset the GPU at a service window to retrain the link.",
        "warning"),
    140: XidInfo(
        "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error",
        "Uncorrectable GPU memory errors interrupted the driver's ability to mark pages for dynamic page "
        "offlining or row remapping.",
        "Immediate: RESET_GPU (drain first); contact the hardware vendor if it persists.",
        "critical"),
}


_BUCKETS = {
    "RESTART_APP": "restart the application",
    "RESET_GPU": "drain the GPU and reset it (`nvidia-smi -r -i <gpu>`), or reboot the node",
    "RESTART_BM": "reboot the node",
    "RESTART_VM": "restart the VM",
    "RESTART_FM": "restart nvidia-fabricmanager",
    "IGNORE": "no immediate action",
    "CONTACT_SUPPORT": "contact NVIDIA / the hardware vendor",
    "CHECK_MECHANICALS": "check the GPU's seating and auxiliary power cabling",
    "UPDATE_SWFW": "update the driver / firmware",
    "CHECK_APP/CUDA": "check the application and CUDA version",
    "CHECK_UVM": "check the application's unified-memory use",
}
_CRITICAL_BUCKETS = frozenset({"RESET_GPU", "RESTART_BM", "RESTART_VM", "CHECK_MECHANICALS", "UPDATE_SWFW"})


def _action(bucket: str) -> str:
    if not bucket:
        return "not given in the catalog"
    if bucket.startswith("WORKFLOW_") or bucket.startswith("XID_"):
        return f"{bucket} (follow NVIDIA's documented workflow for this Xid)"
    return f"{bucket} ({_BUCKETS[bucket]})" if bucket in _BUCKETS else bucket


def _from_nvidia_catalog(code: int) -> XidInfo | None:
    entry = NVIDIA_XID_CATALOG.get(code)
    if entry is None:
        return None
    mnemonic, description, immediate, investigatory = entry
    critical = immediate in _CRITICAL_BUCKETS or immediate.startswith("WORKFLOW_NVLINK") or (
        not immediate and any(word in description.lower() for word in ("halt", "fatal", "errors found")))
    return XidInfo(
        mnemonic, description,
        f"{description} (from NVIDIA's Xid catalog).",
        f"Immediate: {_action(immediate)}. Investigate: {_action(investigatory)}.",
        "critical" if critical else "warning")


def xid_info(code: int) -> XidInfo:
    """gpunode's entry, else NVIDIA's catalog entry, else a generic one pointing at NVIDIA's catalog."""
    return XID_MEANINGS.get(code) or _from_nvidia_catalog(code) or XidInfo(
        "UNKNOWN", f"Xid {code}", "Not in NVIDIA's Xid catalog as of late 2025.",
        f"Look the code up in NVIDIA's Xid catalog ({XID_DOC_URL}) and follow its resolution bucket.",
        "warning")
