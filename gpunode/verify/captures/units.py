"""Failed systemd units in a capture (systemctl's and the journal's own words), as findings for that unit.

The wordings are systemd's format strings:
- systemctl (src/shared/bus-wait-for-jobs.c @ 0272ce1398858a31d087e91c676b00d612d1bded,
  log_job_error_with_service_result()): "Job for %s failed because %s." (the reason from its explanations table:
  "the control process exited with error code", "a timeout was exceeded", ...) and "Job for %s failed.";
  check_wait_response(): "Job for %s timed out.", "A dependency job for %s failed. See 'journalctl -xe' for details."
- the journal (src/core/job.c @ 0f82bc5e6c9719021fed21113e539e0d7533a4b0, job_done_message_format(),
  generic_finished_start_job[JOB_FAILED]): "Failed to start %s." (%s is the unit's description or, since systemd 253
  with status_unit_format=combined, "<unit> - <description>"); src/core/service.c @
  8017ed7e0e0ffaafcf9856f963928ca2a21340b6: "Main process exited, code=%s, status=%i/%s" (the control process's
  "Control process exited, ..." beside it) and "Failed with result '%s'.", each behind the unit's "%s: " log prefix.
- `systemctl status`: "Active: failed (Result: %s)".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.parsers.model import Finding, SmiReport

_UNIT = r"(?P<unit>[\w@.:\\-]+\.(?:service|socket|mount|timer|target|path|scope))"
_FAILED = (
    re.compile(r"Job for " + _UNIT + r" (?:failed(?: because (?P<why>[^.\n]+))?|timed out)\."),
    re.compile(r"A dependency job for " + _UNIT + r" failed\."),
    re.compile(_UNIT + r": (?:Failed with result '(?P<result>[\w-]+)'|(?:Main|Control) process exited, "
               r"code=(?P<code>\w+), status=(?P<status>\d+/[\w-]+))"),
    re.compile(r"Failed to start (?P<desc>.+?)\.?\s*$", re.M),
)
_STATUS_UNIT = re.compile(r"^\W*" + _UNIT + r" - ", re.M)
_STATUS_FAILED = re.compile(r"^\s*Active: failed \(Result: (?P<result>[\w-]+)\)", re.M)
# units of the GPU stack: their failure is GPU evidence; other units (sshd, cron, ...) are not read
_GPU_STACK = re.compile(r"nvidia|fabricmanager|nvsm|dcgm|nv-hostengine|persistenced|docker|containerd|crio|cri-o|"
                        r"kubelet|dkms|cuda|nv_peer|gdrcopy|gdrdrv|mlnx|openibd", re.I)
# units GPU work cannot do without (vGPU guests, GPU containers); a failed persistenced/powerd/dcgm is a warning
_NEEDED = re.compile(r"nvidia-vgpu-mgr|nvidia-vgpud|docker|containerd|crio|cri-o|kubelet", re.I)
# descriptions of "Failed to start %s." that name a GPU-stack unit, as its packages write them
_DESCRIPTIONS = (
    (re.compile(r"NVIDIA fabric manager", re.I), "nvidia-fabricmanager.service"),
    (re.compile(r"NVIDIA Persistence Daemon", re.I), "nvidia-persistenced.service"),
    (re.compile(r"NVIDIA DCGM", re.I), "nvidia-dcgm.service"),
    (re.compile(r"Docker Application Container Engine", re.I), "docker.service"),
    (re.compile(r"containerd container runtime", re.I), "containerd.service"),
    (re.compile(r"kubelet", re.I), "kubelet.service"),
)


@dataclass(frozen=True)
class FailedUnit:
    """A unit of the GPU stack that failed, with the first line that says so."""

    unit: str
    line: str


def failed_units(text: str) -> list[FailedUnit]:
    """The GPU-stack units text says failed (in order of first mention, one entry per unit)."""
    found: dict[str, str] = {}
    for line in text.split("\n"):
        unit = _failed_unit(line)
        if unit and _GPU_STACK.search(unit):
            found.setdefault(unit, line.strip())
    status_unit = _STATUS_UNIT.search(text)
    status = _STATUS_FAILED.search(text)
    if status_unit and status and _GPU_STACK.search(status_unit.group("unit")):
        found.setdefault(status_unit.group("unit"), status.group(0).strip())
    return [FailedUnit(unit, line) for unit, line in found.items()]


def _failed_unit(line: str) -> str | None:
    for pattern in _FAILED:
        match = pattern.search(line)
        if match is None:
            continue
        if "unit" in match.groupdict() and match.group("unit"):
            return match.group("unit")
        desc = match.group("desc")
        named = re.match(_UNIT, desc)
        if named:
            return named.group("unit")
        return next((unit for words, unit in _DESCRIPTIONS if words.search(desc)), None)
    return None


_NVSWITCH_GPU = re.compile(r"SXM|HGX|\bHBM3e?\b|\bG?B[23]00\b|\bH200\b(?! NVL)|\bH20\b|\bH800\b|DGX", re.I)
_NOT_NVSWITCH_GPU = re.compile(r"GeForce|RTX|Quadro|TITAN|PCIe|\bNVL\b|\bL4\b|\bL40S?\b|\bA10G?\b|\bA16\b|\bA2\b|"
                               r"\bA30\b|\bA40\b|\bT4\b|\bP4\b|\bP40\b|\bP100-PCIE|Tesla K", re.I)
_NVSWITCH_WORDS = re.compile(r"nvidia-nvswitch\d*:|NVSwitch(?:es)? (?:to route|device \d|\d)|Successfully configured "
                             r"all the available NVSwitches|SXid \(PCI:", re.I)
_NOTHING_TO_DO = re.compile(r"NV_WARN_NOTHING_TO_DO")


def fabric_context(report: SmiReport | None, nvswitches: int, text: str) -> str:
    """"nvswitch" when the system has NVSwitches (SXM/HGX GPUs, NVSwitch devices or messages), "none" when it has
    none (PCIe/GeForce GPUs only, or fabric manager's own "nothing to do"), else "unknown"."""
    names = [gpu.name or "" for gpu in (report.gpus if report else [])]
    if nvswitches or _NVSWITCH_WORDS.search(text) or any(_NVSWITCH_GPU.search(name) for name in names):
        return "nvswitch"
    if _NOTHING_TO_DO.search(text) or (names and all(_NOT_NVSWITCH_GPU.search(name) for name in names)):
        return "none"
    return "unknown"


def unit_findings(units: list[FailedUnit], context: str, report: SmiReport | None) -> list[Finding]:
    """One finding per failed unit; nvidia-fabricmanager's by whether the system has NVSwitches."""
    findings = []
    for failed in units:
        if "fabricmanager" in failed.unit:
            findings.append(_fabric_manager(failed, context, report))
            continue
        findings.append(Finding(
            "unit-failed", "critical" if _NEEDED.search(failed.unit) else "warning",
            f"the systemd unit {failed.unit} failed",
            repr(failed.line[:300]),
            f"Read why: `systemctl status {failed.unit}` and `journalctl -xeu {failed.unit} -b`; fix the cause it "
            f"names, then `systemctl restart {failed.unit}` (or `systemctl disable --now {failed.unit}` when this "
            "host does not need it)."))
    return findings


def _fabric_manager(failed: FailedUnit, context: str, report: SmiReport | None) -> Finding:
    gpus = sorted({gpu.name for gpu in (report.gpus if report else []) if gpu.name})
    seen = f"; GPUs: {', '.join(gpus)}" if gpus else ""
    if context == "none":
        return Finding(
            "fabricmanager-no-nvswitch", "warning", "nvidia-fabricmanager failed on a system without NVSwitch: "
            "fabric manager is not needed here", f"{failed.line[:300]!r}{seen}",
            "Fabric manager only runs NVSwitch fabrics (HGX/DGX baseboards with SXM GPUs); PCIe GPUs and "
            "NVLink-bridged pairs do not use it and it exits with NV_WARN_NOTHING_TO_DO: `systemctl disable --now "
            "nvidia-fabricmanager` (and drop the package).")
    what = "an NVSwitch system" if context == "nvswitch" else "a system that may have NVSwitches"
    return Finding(
        "fabricmanager-failed", "critical", f"nvidia-fabricmanager failed on {what}: CUDA cannot use the GPUs "
        "over the NVLink fabric until it runs", f"{failed.line[:300]!r}{seen}",
        "Read why: `journalctl -u nvidia-fabricmanager -b` and /var/log/fabricmanager.log. Install "
        "nvidia-fabricmanager of exactly the driver's version (`nvidia-smi` Driver Version; hold both), check the "
        "nvidia-nvswitch module is loaded (`lsmod | grep nvswitch`), then `systemctl enable --now "
        "nvidia-fabricmanager`. If this host has no NVSwitch (PCIe GPUs only), disable the service instead.")
