"""Which GPUs an input names when it holds no nvidia-smi GPU list: PCI addresses in kernel messages, lspci
devices and link states, UUIDs in device-plugin lines. Used to say how many GPUs a capture is about."""

from __future__ import annotations

import re

from gpunode.parsers.dcgmi import dcgmi_gpus
from gpunode.parsers.kernel_log import scan_kernel_log
from gpunode.parsers.smi_values import normalize_bus_id
from gpunode.verify.evidence import Evidence

# "Unable to determine the device handle for GPU 0000:02:00.0: ..." names the GPU it failed on.
_ERROR_GPU = re.compile(r"for GPU\s?(?P<bus>[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)")
# A row of `nvidia-smi topo -m` / `topo -p2p`: "GPU3   NV18  X  ..." (its own cell X).
_MATRIX_ROW = re.compile(r"^\s*GPU(?P<n>\d+)(?:\s+\S+)*?\s+X(?:\s|$)", re.M)


def matrix_gpus(text: str) -> set[str]:
    """The GPUs of a topology matrix (its rows with an X on the diagonal)."""
    return {f"topo-gpu-{m.group('n')}" for m in _MATRIX_ROW.finditer(text)}


def _key(ident: str) -> str:
    """A PCI address without its function and domain width, or a UUID, lower-cased."""
    bus = normalize_bus_id(ident) if ":" in ident else None
    return bus.split(".")[0] if bus else ident.lower()


def gpus_seen(evidence: Evidence) -> set[str]:
    """Identities of the GPUs the non-nvidia-smi evidence names (empty when it names none); AER messages name
    the root port above a GPU, not the GPU, and are left out."""
    seen: set[str] = set()
    for text in (evidence.kernel_log, evidence.smi_error):  # the texts analyze() scans for kernel events
        if not text:
            continue
        scan = scan_kernel_log(text)
        events = [*scan.xids, *scan.lost, *scan.init_failures, *(event for condition, event in scan.conditions
                                                                 if not condition.id.startswith("pcie-"))]
        seen |= {_key(e.pci) for e in events if e.pci}
    if evidence.smi_error:
        seen |= {_key(m.group("bus")) for m in _ERROR_GPU.finditer(evidence.smi_error)}
    if evidence.dcgmi:
        seen |= dcgmi_gpus(evidence.dcgmi)
    seen |= {_key(d.slot) for d in evidence.pci_devices or [] if d.is_gpu}
    seen |= {_key(s.slot) if s.slot != "?" else "lspci-excerpt" for s in evidence.link_states or []}
    return seen

