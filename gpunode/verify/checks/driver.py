"""Is there a GPU, does the driver see it, and does it match what the operator expects?"""

from __future__ import annotations

import re

from gpunode.facts.packages import version_at_least
from gpunode.parsers.errors_text import ErrorMatch
from gpunode.parsers.kernel_log import KernelScan
from gpunode.parsers.lspci import PciDevice
from gpunode.parsers.model import Finding
from gpunode.parsers.smi_values import normalize_bus_id
from gpunode.verify.evidence import Evidence

_EXPLAINED_BY_NO_GPU = frozenset({"driver-not-loaded", "no-devices-found", "nvml-library-missing",
                                  "nvidia-smi-missing"})
_NVML_VERSION = re.compile(r"NVML library version:\s*\S+")


def _slots(devices: list[PciDevice]) -> str:
    return ", ".join(device.slot for device in devices)


def driver_checks(evidence: Evidence, errors: list[ErrorMatch], scan: KernelScan) -> list[Finding]:
    """no-nvidia-gpu, error-text findings, count/model/version expectations."""
    findings: list[Finding] = []
    pci_gpus = evidence.pci_gpus
    no_gpu = pci_gpus is not None and not pci_gpus
    if no_gpu:
        quoted = [f"nvidia-smi: {match.line!r} (expected without a GPU)" for match in errors
                  if match.id in _EXPLAINED_BY_NO_GPU]
        findings.append(Finding(
            "no-nvidia-gpu", "critical", "no NVIDIA GPU on the PCI bus",
            "; ".join([f"PCI scan lists {len(evidence.pci_devices or [])} NVIDIA GPU/NVSwitch device(s) "
                       "and no device of class 0300/0302 with vendor 10de", *quoted]),
            "This host has no visible NVIDIA GPU: check the instance type/flavor really has GPUs, that the "
            "GPU is "
            "passed through to the VM, or (bare metal) that it is seated and powered; confirm with "
            "`lspci -nn | grep -i 10de`.",
        ))
    for match in errors:
        if match.context == "kernel" or (no_gpu and match.id in _EXPLAINED_BY_NO_GPU):
            continue
        findings.append(_error_finding(match, evidence, scan))
    findings.extend(_count_checks(evidence))
    findings.extend(_model_check(evidence))
    findings.extend(_driver_version_check(evidence))
    return findings


def _error_finding(match: ErrorMatch, evidence: Evidence, scan: KernelScan) -> Finding:
    where = "nvidia-smi" if match.context == "host" else match.context  # container, kubernetes, framework, build
    notes = [f"{where}: {match.line[:400]!r}"]
    pci_gpus = evidence.pci_gpus
    if pci_gpus and match.id in ("driver-not-loaded", "no-devices-found", "nvml-library-missing"):
        notes.append(f"PCI shows {len(pci_gpus)} NVIDIA GPU(s) at {_slots(pci_gpus)}")
    if match.id == "driver-library-mismatch" and evidence.smi_error:
        version = _NVML_VERSION.search(evidence.smi_error)
        if version:
            notes.append(version.group(0))
    if match.id == "no-devices-found":
        notes.extend(f"kernel: {event.line!r}" for event in scan.init_failures[:3])
    return Finding(match.id, match.severity, match.summary, "; ".join(notes), match.remedy)


def _count_checks(evidence: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    smi, pci_gpus = evidence.smi, evidence.pci_gpus
    if smi is not None and pci_gpus and smi.gpu_count != len(pci_gpus):
        seen = {normalize_bus_id(g.pci_bus_id) for g in smi.gpus if g.pci_bus_id}
        missing = [d for d in pci_gpus if seen and normalize_bus_id(d.slot) not in seen]
        extra = f"; not seen by nvidia-smi: {_slots(missing)}" if missing else ""
        findings.append(Finding(
            "gpu-count-mismatch", "critical",
            f"{len(pci_gpus)} NVIDIA GPU(s) on PCI but nvidia-smi reports {smi.gpu_count}",
            f"PCI GPUs at {_slots(pci_gpus)}; nvidia-smi ({smi.source_kind}) GPUs: "
            f"{', '.join(g.pci_bus_id or g.name or '?' for g in smi.gpus) or 'none'}{extra}",
            "A GPU is present on the bus but not initialised by the driver: check `dmesg | grep -E "
            "'NVRM|Xid'` "
            "for RmInitAdapter failures or Xid 79, reseat/power-check the missing GPU, reboot, and RMA it "
            "if it "
            "stays missing.",
        ))
    expected = evidence.expectations.expect_gpus
    if expected is not None:
        count, source = (smi.gpu_count, "nvidia-smi") if smi is not None else (
            (len(pci_gpus), "PCI scan") if pci_gpus is not None else (None, ""))
        if count is not None and count != expected:
            findings.append(Finding(
                "gpu-count-expected", "critical", f"expected {expected} GPU(s), found {count}",
                f"{source} reports {count} GPU(s); inventory expects {expected}",
                "Check the instance type / hardware order, then look for GPUs missing from nvidia-smi (Xid "
                "79, "
                "RmInitAdapter failures in dmesg). Fix the inventory if the expectation is wrong.",
            ))
    return findings


def _model_check(evidence: Evidence) -> list[Finding]:
    wanted = evidence.expectations.expect_model
    if not wanted:
        return []
    # Whole-token match: "H100" must not match "GH100 [H200 ...]", "A10" must not match "A10G".
    pattern = re.compile(r"(?<![A-Za-z0-9])" + re.escape(wanted.strip()) + r"(?![A-Za-z0-9])", re.I)
    names = [(g.label, g.name) for g in evidence.smi.gpus if g.name] if evidence.smi else []
    if not names and evidence.pci_gpus:
        names = [(f"PCI {d.slot}", d.description) for d in evidence.pci_gpus]
    wrong = [f"{label}: {name!r}" for label, name in names if not pattern.search(name)]
    if not wrong:
        return []
    return [Finding(
        "gpu-model-expected", "critical", f"{len(wrong)} GPU(s) are not the expected model {wanted!r}",
        "; ".join(wrong),
        "The node has different GPUs than the inventory says: check the instance type / hardware order, or "
        "correct expect_model in the inventory.",
    )]


def _driver_version_check(evidence: Evidence) -> list[Finding]:
    minimum = evidence.expectations.min_driver
    smi = evidence.smi
    if not minimum or smi is None or not smi.driver_version:
        return []
    if version_at_least(smi.driver_version, minimum):
        return []
    return [Finding(
        "driver-version-too-old", "critical",
        f"driver {smi.driver_version} is older than the required {minimum}",
        f"nvidia-smi ({smi.source_kind}) Driver Version: {smi.driver_version}; required >= {minimum}",
        f"Install driver {minimum} or newer from the same branch policy (e.g. the -server branch), reboot or "
        "reload the modules, and hold the packages afterwards.",
    )]
