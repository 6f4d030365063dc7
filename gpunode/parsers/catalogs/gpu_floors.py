"""The bandwidth floors of one catalogued GPU model: published where a health-check suite publishes one (Azure's
conf per VM size: nccl_references.yaml, nvbandwidth_references.yaml), else derived from the model's sourced specs by a
stated rule whose constants are read from those same published floors (never typed in):

- host<->device copy: the lowest published floor of a model of the same PCIe generation (Gen3: V100, Gen4: A100,
  Gen5: H100/H200), scaled by the narrowest link NVIDIA accepts for the SKU (DCGM diag's min_pci_width, or the
  product brief: width / 16): a T4 or an L40S at x8 is within spec, an H100 at x8 is not.
- GPU-to-GPU copy (all-to-all NVLink only): the model's NVLink rate each way x the lowest published ratio of a P2P
  floor to its model's NVLink rate each way.
- all_reduce busbw (one node, all-to-all NVLink only): the same, with the lowest published ratio of an all_reduce
  floor to its model's NVLink rate each way, at that floor's message size.
A model for which neither exists gets None: the caller says "no reference", never "healthy".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpunode.parsers.catalogs.gpu_models import GpuModel, by_key

_HERE = Path(__file__).parent


@dataclass(frozen=True)
class Floor:
    """One threshold: the value, whether published or derived, and where it comes from (in words a user can check)."""

    gbs: float
    kind: str                       # "published" or "derived"
    source: str                     # published: repo@commit:path:line (vm); derived: the rule and its inputs
    message_bytes: int | None = None  # all_reduce: the size the floor is for
    gpus: int | None = None           # published: the GPU count of the system it was measured on


@cache
def published(name: str) -> tuple[dict[str, Any], ...]:
    """The entries of nccl_references.yaml or nvbandwidth_references.yaml ("nccl" / "nvbandwidth")."""
    data = yaml.safe_load((_HERE / f"{name}_references.yaml").read_text(encoding="utf-8"))
    return tuple(data["references"])


def published_source(ref: dict[str, Any]) -> str:
    """`repo@commit12:path:line (vm)` of a published entry."""
    s = ref["source"]
    return f"{s['repo']}@{s['commit'][:12]}:{s['path']}:{s['line']} ({ref['vm']})"


def _of(model: GpuModel, name: str) -> list[dict[str, Any]]:
    return [r for r in published(name) if model.key in r.get("models", ())]


def _each_way(model: GpuModel) -> float | None:
    both = model.value("nvlink_gbs")
    return float(both) / 2 if both else None


@cache
def gen_floors() -> dict[int, tuple[float, str]]:
    """PCIe generation -> (lowest published host<->device floor of a model of that generation, its source)."""
    found: dict[int, tuple[float, str]] = {}
    for ref in published("nvbandwidth"):
        for key in ref["models"]:
            gen = by_key(key).value("pcie_gen")
            if gen and (gen not in found or float(ref["h2d_gbs"]) < found[gen][0]):
                found[gen] = (float(ref["h2d_gbs"]), f"{published_source(ref)} on {key}, PCIe Gen{gen}")
    return found


def _lowest_ratio(name: str, value_key: str) -> tuple[float, dict[str, Any], str] | None:
    """(floor / NVLink each way, the entry, its model key): the lowest among all-to-all NVLink models."""
    best: tuple[float, dict[str, Any], str] | None = None
    for ref in published(name):
        for key in ref["models"]:
            model = by_key(key)
            each_way = _each_way(model)
            if not (model.nvlink_all_to_all and each_way and ref.get(value_key)):
                continue
            ratio = float(ref[value_key]) / each_way
            if best is None or ratio < best[0]:
                best = (ratio, ref, key)
    return best


def h2d_floor(model: GpuModel) -> Floor | None:
    """The host<->device copy floor per GPU (GB/s), published or derived; None when neither can be had."""
    refs = _of(model, "nvbandwidth")
    if refs:
        ref = min(refs, key=lambda r: float(r["h2d_gbs"]))
        return Floor(float(ref["h2d_gbs"]), "published", published_source(ref), gpus=int(ref["gpus"]))
    gen, width = model.value("pcie_gen"), model.value("min_width") or model.value("pcie_width")
    if not gen or not width or gen not in gen_floors():
        return None
    base, where = gen_floors()[gen]
    value = round(base * min(int(width), 16) / 16, 2)
    return Floor(value, "derived", f"derived: {base:g} GB/s (lowest published Gen{gen} floor, {where}) x "
                 f"x{int(width)}/x16 (the narrowest link NVIDIA accepts for it, {model.cite('min_width')})")


def p2p_floor(model: GpuModel, gpus: int | None) -> Floor | None:
    """The GPU-to-GPU copy floor per pair: published for the model (applied to a system no larger than the published
    one unless NVLink joins all GPUs), or derived for an all-to-all NVLink model."""
    refs = [r for r in _of(model, "nvbandwidth") if r.get("nvlink") and r.get("p2p_gbs")]
    if refs:
        ref = min(refs, key=lambda r: float(r["p2p_gbs"]))
        largest = max(int(r["gpus"]) for r in refs)
        if model.nvlink_all_to_all or (gpus is not None and gpus <= largest):
            return Floor(float(ref["p2p_gbs"]), "published", published_source(ref), gpus=int(ref["gpus"]))
        return None
    each_way, lowest = _each_way(model), _lowest_ratio("nvbandwidth", "p2p_gbs")
    if not (model.nvlink_all_to_all and each_way and lowest):
        return None
    ratio, ref, key = lowest
    return Floor(round(ratio * each_way, 1), "derived",
                 f"derived: NVLink {each_way:g} GB/s each way ({model.cite('nvlink_gbs')}) x {ratio:.3f} (the "
                 f"lowest published P2P floor / NVLink ratio: {ref['p2p_gbs']:g} of {published_source(ref)} on {key})")


def allreduce_floor(model: GpuModel, gpus: int, hosts: int) -> Floor | None:
    """The all_reduce bus-bandwidth floor for `gpus` GPUs on `hosts` hosts: published for that model and count, or
    derived for one all-to-all NVLink node; None across hosts (the network sets it) or without a rule."""
    refs = [r for r in _of(model, "nccl") if int(r["gpus"]) == gpus]
    if refs:
        ref = min(refs, key=lambda r: float(r["busbw_gbs"]))
        return Floor(float(ref["busbw_gbs"]), "published", published_source(ref), int(ref["message_bytes"]), gpus)
    each_way, lowest = _each_way(model), _lowest_ratio("nccl", "busbw_gbs")
    if hosts > 1 or gpus < 2 or gpus > 8 or not (model.nvlink_all_to_all and each_way and lowest):
        return None
    ratio, ref, key = lowest
    return Floor(round(ratio * each_way, 1), "derived",
                 f"derived: NVLink {each_way:g} GB/s each way ({model.cite('nvlink_gbs')}) x {ratio:.3f} (the "
                 f"lowest published all_reduce floor / NVLink ratio: {ref['busbw_gbs']:g} of {published_source(ref)}"
                 f" on {key})", int(ref["message_bytes"]), gpus)
