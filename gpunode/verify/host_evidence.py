"""verify-gpu's evidence from one host: facts.sh + gpu_evidence.sh output -> Evidence (also read from bundles)."""

from __future__ import annotations

from gpunode.distros import el_kernel_stem
from gpunode.facts import Facts, parse_facts
from gpunode.modcache.guard_hooks import parse_state
from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.lspci import classify_pci
from gpunode.parsers.lspci_vv import parse_lspci_vv
from gpunode.parsers.smi_xml import parse_smi_xml
from gpunode.verify.evidence import Evidence, Expectations, FabricManagerState

MARKER = "@@evidence nvidia-smi"


def split_sections(output: str) -> tuple[str, dict[str, str]]:
    """facts.sh output, and the evidence sections that follow it."""
    facts_text, _, rest = output.partition("@@evidence ")
    sections: dict[str, str] = {}
    for chunk in ("@@evidence " + rest).split("@@evidence ")[1:]:
        name, _, body = chunk.partition("\n")
        sections[name.strip()] = body
    return facts_text, sections


def evidence_from(facts: Facts, sections: dict[str, str], expectations: Expectations) -> Evidence:
    """Turn gathered facts and evidence sections into what the checks read."""
    pci = [classify_pci(g.slot, "0x10de", g.device_id, g.class_code) for g in facts.gpus]
    evidence = Evidence(
        pci_devices=[d for d in pci if d is not None],
        kernel_log=sections.get("kernel-log", ""),
        expectations=expectations,
        dkms_status=_dkms_lines(facts),
        running_kernel=facts.kernel.running,
        next_boot_kernel=facts.kernel.next_boot or None,
        next_boot_headers=facts.kernel.next_boot in facts.kernel.headers,
        running_headers=sections.get("headers", "").strip() or None,
        running_module=sections["modules"].strip().partition("\n")[0] if "modules" in sections else None,
        precompiled_modules=_precompiled_modules(facts),
        nouveau_loaded=facts.nvidia.nouveau_loaded,
        kernel_guard=parse_state(sections.get("kernel-guard", "")) or None,
    )
    evidence.dev_char = sections.get("dev-char")
    states, _ = parse_lspci_vv(sections.get("lspci-vv", ""))
    evidence.link_states = states or None
    if facts.nvswitch_present:
        fm_version = next((v for n, v in facts.nvidia.packages.items() if n.startswith("nvidia-fabricmanager")), None)
        evidence.fabricmanager = FabricManagerState(facts.nvidia.fabricmanager_active, fm_version)
    smi = sections.get("nvidia-smi", "")
    body, _, code = smi.rpartition("@@exit ")
    if smi.startswith("@@missing"):
        if evidence.pci_gpus:
            evidence.smi_error = "nvidia-smi: command not found"
    elif code.strip() == "0":
        try:
            evidence.smi = parse_smi_xml(body)
        except SmiParseError as exc:
            evidence.smi_error = f"{exc}\n{body[:2000]}"
    else:
        evidence.smi_error = body.strip() or f"nvidia-smi exited {code.strip()}"
    return evidence


def _dkms_lines(facts: Facts) -> list[str] | None:
    """`dkms status` lines; None (not applicable) when no NVIDIA driver is installed at all."""
    if not facts.nvidia.dkms and not any(n.startswith(("nvidia", "cuda-drivers")) for n in facts.nvidia.packages):
        return None
    return [f"{d.module}/{d.version}, {d.kernel}, {d.arch}: {d.status}" if d.kernel
            else f"{d.module}/{d.version}: {d.status}" for d in facts.nvidia.dkms]


def _precompiled_modules(facts: Facts) -> list[str]:
    """Installed precompiled NVIDIA module packages of the running kernel (no DKMS entry is made for them)."""
    kernel = facts.kernel.running or ""
    stem = el_kernel_stem(kernel)
    if not kernel:
        return []
    return sorted(name for name in facts.nvidia.packages
                  if (name.startswith("linux-modules-nvidia-") and name.endswith(f"-{kernel}"))
                  or (stem and name.startswith("kmod-nvidia-") and name.endswith(f"-{stem}")))


def evidence_from_output(output: str, expectations: Expectations) -> Evidence:
    """Evidence from the saved stdout of facts.sh + gpu_evidence.sh (gpunode-evidence.txt of a bundle)."""
    facts_text, sections = split_sections(output)
    return evidence_from(parse_facts(facts_text), sections, expectations)
