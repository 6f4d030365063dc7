"""docs/gpu-models.md: the GPU model catalogue and each model's floors, read from gpunode/parsers/catalogs/."""

from __future__ import annotations

from gpunode.docgen.where import GENERATED
from gpunode.markdown import cell, code, table


def _fact(model: object, fact: str, unit: str = "") -> str:
    from gpunode.parsers.catalogs.gpu_models import GpuModel

    assert isinstance(model, GpuModel)
    value = model.value(fact)
    return "(no source)" if value is None else f"{value}{unit}"


def _floor(floor: object, extra: str = "") -> str:
    from gpunode.parsers.catalogs.gpu_floors import Floor

    if floor is None:
        return "none (UNKNOWN)"
    assert isinstance(floor, Floor)
    return f"{floor.gbs:g} GB/s{extra} ({floor.kind})"


def gpu_models_md() -> str:
    from gpunode.parsers.catalogs.gpu_floors import allreduce_floor, h2d_floor, p2p_floor
    from gpunode.parsers.catalogs.gpu_models import models

    out = [GENERATED, "", "# GPU models and their references", "",
           "What `diagnose` and the acceptance checks compare a measured bandwidth with. A GPU is recognised by the "
           "name nvidia-smi prints (or `--expect-model`, which also takes the aliases); a family name alone "
           "(`H100`, `A100`) is ambiguous and gets the lowest published floor of the family. Each fact and floor "
           "names its source in `gpunode/parsers/catalogs/gpu_models.yaml` (with the source's own words, checked "
           "by `tests/test_gpu_models.py`). A *published* floor is a health-check suite's (Azure's node health "
           "checks, one conf per VM size); a *derived* floor follows the rule in "
           "`gpunode/parsers/catalogs/gpu_floors.py`, whose constants are read from the published floors. No floor "
           "means no verdict: UNKNOWN, never healthy.", "",
           "## Models", ""]
    rows = []
    for m in models():
        nvlink = _fact(m, "nvlink_gbs", " GB/s") if m.value("nvlink_gbs") else "none"
        width = f" x{m.value('pcie_width')}" if m.value("pcie_width") else ""
        link = f"Gen{m.value('pcie_gen')}{width}" if m.value("pcie_gen") else "(no source)"
        clouds = "; ".join(str(c["v"]) for c in m.clouds) or "-"
        rows.append([code(m.key), cell(" / ".join(m.names)), code(m.value("device_id")), m.form,
                     _fact(m, "memory_gb", " GB"), link, f"x{m.value('min_width') or '?'}", nvlink, cell(clouds)])
    out += table(["key", "nvidia-smi name", "PCI id", "form", "memory", "host link", "narrowest link NVIDIA accepts",
                  "NVLink per GPU", "rented as"], rows)
    out += ["", "## Floors", "",
            "Host-to-device / device-to-host copy per GPU (nvbandwidth `*_memcpy_ce`), GPU-to-GPU copy per pair "
            "(`device_to_device_memcpy_read_ce`) and NCCL all_reduce bus bandwidth on one node of 8 GPUs.", ""]
    rows = []
    for m in models():
        ar = allreduce_floor(m, 8, 1)
        size = f" at {ar.message_bytes >> 30} GiB" if ar and ar.message_bytes else ""
        rows.append([code(m.key), _floor(h2d_floor(m)), _floor(p2p_floor(m, 8)), _floor(ar, size)])
    out += table(["model", "host<->device", "GPU<->GPU (8 GPUs)", "all_reduce busbw (8 GPUs)"], rows)
    out += ["", "## Where each floor comes from", ""]
    for m in models():
        for what, floor in (("host<->device", h2d_floor(m)), ("GPU<->GPU", p2p_floor(m, 8)),
                            ("all_reduce", allreduce_floor(m, 8, 1))):
            if floor is not None:
                out.append(f"- {code(m.key)} {what}: {cell(floor.source)}")
    return "\n".join(out) + "\n"
