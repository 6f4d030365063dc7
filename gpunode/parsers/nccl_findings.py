"""Findings on one nccl-tests run against the per-system references (catalogs/nccl_references.yaml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

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


def _source(ref: dict[str, Any]) -> str:
    s = ref["source"]
    return f"{s['repo']}@{s['commit'][:12]}:{s['path']}:{s['line']} ({ref['vm']})"


def nccl_findings(run: NcclRun, expect_model: str | None = None) -> list[Finding]:
    """Corruption, then bandwidth against the reference for the model and GPU count (or say none applies)."""
    found: list[Finding] = []
    name = run.collective or "nccl-tests"
    if run.wrong or run.out_of_bounds:
        found.append(Finding("nccl-wrong-results", "critical",
                             f"{name}: {run.wrong} wrong element(s) / {run.out_of_bounds or 0} out-of-bounds value(s)"
                             " - data corruption between GPUs", "#wrong column and '# Out of bounds values'",
                             "Take the node out of service and run dcgmi diag -r 3 and an NVLink/PCIe check."))
    model = expect_model or (run.models[0] if run.models else "")
    gpus = run.n_ranks
    refs = _matching(model, gpus) if name == "all_reduce" and model else []
    if not refs:
        found.append(Finding("nccl-no-reference", "warning",
                             f"{name} on {gpus}x {model or 'unknown GPU'}: no published reference for this "
                             "collective, model and GPU count - no bandwidth verdict",
                             f"max busbw {run.max_busbw()} GB/s, avg {run.avg_busbw} GB/s",
                             "Compare with a known-good node of the same type."))
        return found
    ref = min(refs, key=lambda r: float(r["busbw_gbs"]))
    size = int(ref["message_bytes"])
    measured = run.busbw_at(size)
    at = f"{size // _GIB} GiB"
    if measured is None:
        measured, at = run.max_busbw() or 0.0, f"the largest sizes run (reference is for {size // _GIB} GiB)"
    floor = float(ref["busbw_gbs"])
    claim = f"{name} bus bandwidth {measured:g} GB/s at {at} on {gpus}x {model}"
    if measured >= floor:
        found.append(Finding("nccl-busbw-ok", "ok", f"{claim} is at or above the {floor:g} GB/s reference of "
                             f"{_source(ref)}", f"busbw column at {at}", ""))
    else:
        found.append(Finding("nccl-busbw-low", "critical", f"{claim} is below the {floor:g} GB/s reference of "
                             f"{_source(ref)}", f"busbw column at {at}",
                             "Check NVLink status (nvidia-smi nvlink -s), fabric manager and GPU clocks."))
    return found
