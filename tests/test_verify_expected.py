"""diagnose agrees with the human-judged reading of every capture in tests/data/captures/EXPECTED.yml.

Verdict mapping (gpunode -> EXPECTED.yml):
  healthy -> healthy, unhealthy -> unhealthy, no-evidence -> no-evidence.
  unknown because a capture is *partial* (a table or -q -x cut off, fewer GPU sections than attached; nothing
  critical, every block understood) agrees with `healthy` and with `no-evidence`: gpunode refuses to call a cut
  capture healthy (exit 2, naming what is missing), which is what a person means by "healthy as far as it goes"
  or "nothing to judge". It never agrees with `unhealthy`.
  unknown because an input was not understood agrees with nothing.
GPU count: where EXPECTED gives `gpus`, DiagnoseResult.gpu_count must equal it (nvidia-smi's GPUs, else the GPUs
kernel messages and lspci name by PCI address).
KNOWN_MISSES lists the captures where gpunode still reads differently, each with the reason; every other entry
is asserted, and a known miss that starts agreeing fails too (so the list stays honest).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpunode.verify import diagnose_files
from gpunode.verify.diagnose import DiagnoseResult

CAPTURES = Path(__file__).resolve().parent / "data" / "captures"
EXPECTED: dict[str, dict] = yaml.safe_load((CAPTURES / "EXPECTED.yml").read_text())["captures"]

_CATALOGUE = "the catalogue recognises no line of it that decides the verdict"

# capture -> (what disagrees: "verdict", "gpus" or "verdict gpus", why). Keep short and honest.
KNOWN_MISSES: dict[str, tuple[str, str]] = {
    "csv/polybar-polybar-scripts-42__csv-loop-1-noheader-nounits-series.txt": (
        "verdict", "bare `noheader,nounits` numbers without the command that names their fields: not understood"),
    "errors/Leon-Sander-Local-Multimodal-AI-Chat-31__docker-info-no-nvidia-runtime-wsl.txt": (
        "verdict", "gpunode warns (nvidia-runtime-not-listed): `--gpus` works through the toolkit's hook without "
                   "the runtime, so a runtime list alone is not a fault"),
    "kernel/NVIDIA-open-gpu-kernel-modules-688__gh100-possible-bad-register-read.txt": (
        "verdict", "no signature for 'Possible bad register read' (PRI errors): seen on healthy GPUs too"),
    "other/gpud__fabric-manager.0.log": (
        "verdict", "fabric manager's own log is read as not applicable; its non-fatal NVSwitch errors are not "
                   "analysed"),
    "other/mozilla-DeepSpeech-178__dmon-4gpu-markdown-quoted.txt": (
        "verdict gpus", "`nvidia-smi dmon` is recognised but not analysed (no GPU identities, samples only)"),
    "text_q/stas00-ml-engineering__q-fragment-510-a100-row-remap-pending.txt": (
        "verdict", "row-remap-pending is a warning in gpunode (takes effect at the next reset, NVIDIA: reset when "
                   "convenient); the fragment is also partial, so UNKNOWN"),
    "text_q/stas00-ml-engineering__q-fragment-retired-pages-pending.txt": (
        "verdict", "retired-pages-pending is a warning in gpunode (takes effect when the driver reloads); "
                   "tests/data/README.md also notes this fragment was retyped by its author"),
    # issue 39: dcgmi's connection errors are a warning only and show no GPU: a person reads "no evidence"
    "errors/NVIDIA-dcgm-exporter-193__dcgmi-discovery-unable-to-connect.txt": ("verdict", _CATALOGUE),
    "errors/NVIDIA-DCGM-133__dcgmi-remote-host-unreachable-quoted.txt": ("verdict", _CATALOGUE),
    "kernel/Dunedan-mbp-2016-linux-60__egpu-bar1-0m-no-space.txt": (
        "gpus", "the GPU is named only by the PCI address of NVRM lines that no event reads (BAR1 0M)"),
    "kernel/NVIDIA-open-gpu-kernel-modules-344__bar2-0m-cloud-hypervisor.txt": (
        "gpus", "the GPU is named only by the PCI address of NVRM lines that no event reads (BAR2 0M)"),
    "kernel/Nobara-Project-rpm-sources-526__gsp-firmware-version-mismatch.txt": (
        "gpus", "the GPU is named only by the PCI address of NVRM lines that no event reads (GSP firmware)"),
    "errors/anduril-jetpack-nixos-328__devicequery-driver-insufficient.txt": (
        "verdict", "cudaErrorInsufficientDriver's text (35, 'CUDA driver version is insufficient for CUDA runtime "
                   "version') is left out of cuda-runtime.yaml: no source read prints it verbatim"),
    "errors/NVIDIA-k8s-device-plugin-23__failed-to-start-nvml.txt": (
        "verdict", "the device plugin's 2018 wording 'Failed to start nvml with error:' is not in the catalogue "
                   "(the stored k8s-device-plugin snapshot has no history to pin it at)"),
    # issue 39 (captures of non-NVIDIA programs' messages): still missed with the catalogue wired in
    "errors/trueforge-org-truecharts-19201__allocate-failed-unhealthy-amd-gpu.txt": (
        "verdict", "issue 39: an AMD device plugin's Allocate error in a kubelet wording the catalogue lacks"),
    "kernel/pop-os-pop-3363__aer-correctable-nvidia-10de-2184-journal.txt": (
        "gpus", "issue 39: AER lines naming 10de not yet counted as a GPU"),
}


def _verdict_agrees(result: DiagnoseResult, expected: str) -> bool:
    got = result.verdict
    if got == expected or (got == "not-nvidia" and expected == "no-evidence"):  # only other vendors' messages
        return True
    partial_only = got == "unknown" and result.partial and not result.unreadable
    return bool(partial_only) and expected in ("healthy", "no-evidence")


def _misses(rel: str, entry: dict) -> set[str]:
    result = diagnose_files([CAPTURES / rel])
    wrong = set()
    if not _verdict_agrees(result, entry["verdict"]):
        wrong.add("verdict")
    if "gpus" in entry and result.gpu_count != entry["gpus"]:
        wrong.add("gpus")
    return wrong


def test_every_expected_capture_exists():
    assert len(EXPECTED) >= 100
    assert [rel for rel in EXPECTED if not (CAPTURES / rel).is_file()] == []
    assert set(KNOWN_MISSES) <= set(EXPECTED)


@pytest.mark.parametrize("folder", sorted({rel.split("/")[0] for rel in EXPECTED}))
def test_diagnose_agrees_with_the_human_reading(folder: str):
    wrong, fixed = [], []
    for rel, entry in EXPECTED.items():
        if rel.split("/")[0] != folder:
            continue
        misses = _misses(rel, entry)
        known = set(KNOWN_MISSES[rel][0].split()) if rel in KNOWN_MISSES else set()
        if misses - known:
            wrong.append(f"{rel}: {sorted(misses - known)} differ (expected {entry['verdict']}, "
                         f"gpus {entry.get('gpus')})")
        if known - misses:
            fixed.append(rel)
    assert not wrong, "\n".join(wrong)
    assert not fixed, f"known misses that now agree (remove them from KNOWN_MISSES): {fixed}"
