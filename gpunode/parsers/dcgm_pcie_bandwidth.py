"""The host<->GPU copy bandwidths a `dcgmi diag -r 2/3 -j` PCIe test reports per GPU, as nvbandwidth's CE matrices,
so the per-model floors judge them.

The lines are the PCIe plugin's verbose info (NVIDIA/DCGM@72fa3feaa67d716a75323a8f47c34ff3ee73f824
nvvs/plugin_src/pcie/PcieMain.cpp:221-235 addBandwidthInfo: ``Host to GPU bandwidth:\\t\\t%.2f GB/s``, ``GPU to Host
bandwidth:\\t\\t...``, ``bidirectional bandwidth:\\t...``, added per GPU with AddInfoVerboseForGpu; DCGM 3.x,
NVIDIA/DCGM@661d939e808591f0accb4acce7bc317e99da26e7 PcieMain.cpp:189-197, prefixes ``GPU %u ``). In the JSON they are
the "info" strings of each GPU's PCIe result (gpunode.parsers.dcgmi_json); DCGM copies pinned host memory with the
copy engines, as nvbandwidth's host_to_device_memcpy_ce / device_to_host_memcpy_ce do.
"""

from __future__ import annotations

import re

from gpunode.parsers.dcgmi_json import dcgmi_json_documents, dcgmi_json_results
from gpunode.parsers.nvbandwidth import NvbMatrix, NvbRun

_LINE = re.compile(r"^(?:GPU (\d+) )?(Host to GPU|GPU to Host) bandwidth:\s*([0-9.]+) GB/s")
_TESTCASE = {"Host to GPU": "host_to_device_memcpy_ce", "GPU to Host": "device_to_host_memcpy_ce"}


def dcgm_pcie_run(text: str) -> NvbRun:
    """The PCIe test's per-GPU host<->GPU bandwidths of every dcgmi diag JSON document in text (empty when none)."""
    values: dict[str, dict[int, float]] = {}
    for doc in dcgmi_json_documents(text)[0]:
        for result in dcgmi_json_results(doc):
            if "pcie" not in result.test.lower():
                continue
            for info in result.info:
                m = _LINE.match(info.strip())
                gpu = m[1] if m and m[1] is not None else (result.gpu or "")
                if m and gpu.isdigit():
                    values.setdefault(_TESTCASE[m[2]], {})[int(gpu)] = float(m[3])
    run = NvbRun(devices={gpu: "" for per_gpu in values.values() for gpu in per_gpu})
    for testcase, per_gpu in values.items():
        gpus = sorted(per_gpu)
        run.matrices.append(NvbMatrix(f"dcgmi diag PCIe {testcase} (GB/s)", testcase, gpus,
                                      [(0, [per_gpu[g] for g in gpus])]))
    return run
