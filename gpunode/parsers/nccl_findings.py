"""Findings on one nccl-tests run against the per-model references: published (catalogs/nccl_references.yaml) or
derived (catalogs/gpu_floors.py), for the catalogued model (catalogs/gpu_models.yaml) and GPU count."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpunode.parsers.catalogs.gpu_floors import Floor, allreduce_floor, published_source
from gpunode.parsers.catalogs.gpu_models import identify
from gpunode.parsers.expect_model import model_mismatch
from gpunode.parsers.model import Finding
from gpunode.parsers.nccl_tests import NcclRun

_CATALOG = Path(__file__).parent / "catalogs" / "nccl_references.yaml"
_GIB = 1 << 30


@cache
def references() -> list[dict[str, Any]]:
    """The reference entries, each with its source."""
    data = yaml.safe_load(_CATALOG.read_text(encoding="utf-8"))
    return list(data["references"])


def _matching(model: str, gpus: int) -> list[dict[str, Any]]:
    return [r for r in references() if r["gpus"] == gpus and str(r["model"]).upper() in model.upper()]


def reference(model: str, gpus: int, hosts: int) -> tuple[Floor | None, str]:
    """(all_reduce floor, label) for a GPU name or --expect-model value: the catalogued model's (published for that
    GPU count, else derived for one all-to-all NVLink node), else the published entries of a family name ("H100")."""
    found = identify(model)
    if found is not None:
        label = model if " ".join(model.upper().split()) == found.label.upper() else f"{model} ({found.label})"
        return allreduce_floor(found, gpus, hosts), label
    refs = _matching(model, gpus)
    if not refs:
        return None, model
    ref = min(refs, key=lambda r: float(r["busbw_gbs"]))
    return Floor(float(ref["busbw_gbs"]), "published", published_source(ref), int(ref["message_bytes"]), gpus), model


def _source(floor: Floor) -> str:
    return f"{floor.source} ({floor.kind})" if floor.kind == "published" else floor.source


def _corruption(run: NcclRun, name: str) -> list[Finding]:
    if not (run.wrong or run.out_of_bounds):
        return []
    return [Finding("nccl-wrong-results", "critical",
                    f"{name}: {run.wrong} wrong element(s) / {run.out_of_bounds or 0} out-of-bounds value(s)"
                    " - data corruption between GPUs", "#wrong column and '# Out of bounds values'",
                    "Take the node out of service and run dcgmi diag -r 3 and an NVLink/PCIe check.")]


def _measured(run: NcclRun) -> str:
    """`max busbw 27.28 GB/s, avg 9.09703 GB/s`; what the capture did not show is named (a cut table, no avg)."""
    best = run.max_busbw()
    parts = [f"max busbw {best:g} GB/s" if best is not None else "no table row",
             f"avg {run.avg_busbw:g} GB/s" if run.avg_busbw is not None else "no `# Avg bus bandwidth` line"]
    return ", ".join(parts)


def _no_reference(run: NcclRun, name: str, gpus: int, label: str) -> Finding:
    across = f" across {len(run.hosts)} hosts" if len(run.hosts) > 1 else ""
    count = f"{gpus}x" if gpus else "an unknown number of"
    return Finding("nccl-no-reference", "warning",
                   f"{name} on {count} {label or 'unknown GPU'}{across}: no published or "
                   "derived reference for this collective, model and GPU count - no bandwidth verdict",
                   _measured(run),
                   "Give --expect-model / --expect-gpus when the log does not name them (docs/gpu-models.md "
                   "lists the references), or compare with a known-good node of the same type.")


def _verdict(run: NcclRun, name: str, gpus: int, label: str, floor: Floor, size: int) -> Finding:
    measured = run.busbw_at(size)
    at = f"{size // _GIB} GiB"
    if measured is None:
        measured, at = run.max_busbw() or 0.0, f"the largest sizes run (reference is for {size // _GIB} GiB)"
    claim = f"{name} bus bandwidth {measured:g} GB/s at {at} on {gpus}x {label}"
    if measured >= floor.gbs:
        return Finding("nccl-busbw-ok", "ok", f"{claim} is at or above the {floor.gbs:g} GB/s reference of "
                       f"{_source(floor)}", f"busbw column at {at}", "")
    return Finding("nccl-busbw-low", "critical", f"{claim} is below the {floor.gbs:g} GB/s reference of "
                   f"{_source(floor)}", f"busbw column at {at}",
                   "Check NVLink status (nvidia-smi nvlink -s), fabric manager and GPU clocks.")


def nccl_findings(run: NcclRun, expect_model: str | None = None, expect_gpus: int | None = None) -> list[Finding]:
    """Corruption, then bandwidth against the reference for the model and GPU count (or say none applies). The GPU
    count is the capture's (its rank lines), else `expect_gpus`."""
    name = run.collective or "nccl-tests"
    found = [*_corruption(run, name), *model_mismatch("nccl", run.models[0] if run.models else None, expect_model)]
    model = expect_model or (run.models[0] if run.models else "")
    gpus = run.n_ranks or expect_gpus or 0
    floor, label = reference(model, gpus, len(run.hosts)) if name == "all_reduce" and model and gpus else (None, "")
    if floor is None or floor.message_bytes is None:
        return [*found, _no_reference(run, name, gpus, label or model)]
    return [*found, _verdict(run, name, gpus, label, floor, floor.message_bytes)]
