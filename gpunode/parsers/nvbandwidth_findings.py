"""Findings on one nvbandwidth run: each GPU's host link and each GPU pair against the per-system floors
(catalogs/nvbandwidth_references.yaml), and each GPU against its peers in the same run.

"About half" is measured two ways, both naming the GPU: against the floor (a value at 0.4-0.7 of it: a Gen4 x16
A100 that copies ~25 GB/s and has a 21 GB/s floor copies ~12-13 at x8 or Gen3), and against the median of the other
GPUs of the same test (0.35-0.65 of it), which needs no reference at all.
"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpunode.parsers.catalogs.gpu_floors import Floor, h2d_floor, p2p_floor, published_source
from gpunode.parsers.catalogs.gpu_models import identify
from gpunode.parsers.expect_model import model_mismatch
from gpunode.parsers.model import Finding
from gpunode.parsers.nvbandwidth import NvbMatrix, NvbRun

_CATALOG = Path(__file__).parent / "catalogs" / "nvbandwidth_references.yaml"
_HALF_OF_FLOOR = (0.4, 0.7)
_HALF_OF_PEERS = (0.35, 0.65)
_BELOW_PEERS = 0.75
_FLOOR_TESTS = {"host_to_device_memcpy_ce": "h2d", "device_to_host_memcpy_ce": "d2h"}
_P2P_TEST = "device_to_device_memcpy_read_ce"
_LINK_REMEDY = ("Check that GPU's link: `lspci -vv -s <bus id>` LnkSta against LnkCap (speed and width), "
                "`nvidia-smi -q -d PCIE`; reseat the GPU or its riser / check the slot's BIOS setting, then rerun.")


@cache
def references() -> list[dict[str, Any]]:
    """The reference entries, each with its source."""
    data = yaml.safe_load(_CATALOG.read_text(encoding="utf-8"))
    return list(data["references"])


def matching(model: str) -> list[dict[str, Any]]:
    """The entries for a GPU name or --expect-model value: its family, narrowed to its variant when named."""
    upper = model.upper()
    family = [r for r in references() if str(r["model"]).upper() in upper]
    variant = [r for r in family if str(r["name"]).upper() in upper]
    return variant or family


def floors(model: str, gpus: int | None = None) -> tuple[Floor | None, Floor | None, str]:
    """(host<->device floor, GPU-to-GPU floor, label) for a GPU name or --expect-model value: the catalogued model's
    (gpu_models.yaml, PCIe and SXM parts apart), else the published entries of a family name such as "H100"."""
    found = identify(model)
    if found is not None:
        label = model if _plain(model) == _plain(found.label) else f"{model} ({found.label})"
        return h2d_floor(found), p2p_floor(found, gpus), label
    refs = matching(model) if model else []
    if not refs:
        return None, None, model
    h2d = min(refs, key=lambda r: float(r["h2d_gbs"]))
    h2d_ref = Floor(float(h2d["h2d_gbs"]), "published", published_source(h2d))
    p2p = None
    if all(r.get("nvlink") and r.get("p2p_gbs") for r in refs):
        low = min(refs, key=lambda r: float(r["p2p_gbs"]))
        p2p = Floor(float(low["p2p_gbs"]), "published", published_source(low))
    return h2d_ref, p2p, model


def _plain(text: str) -> str:
    return " ".join(text.upper().split())


def _source(floor: Floor) -> str:
    return f"{floor.source} ({floor.kind})" if floor.kind == "published" else floor.source


def _gpu(run: NvbRun, index: int) -> str:
    bus = run.bus_ids.get(index)
    return f"GPU {index}" + (f" ({bus})" if bus else "")


_HALF_LINK = ("a link trained at half width or one generation down (x8 where x16 is expected, or one PCIe generation "
              "lower): `lspci -vv` LnkSta against LnkCap says which")


def _link_finding(test: str, index: int, claim: str, half: str | None) -> Finding:
    """A GPU's host link below its floor or its peers: named as half speed when `half` says what that looks like."""
    if half:
        return Finding("nvbandwidth-pcie-half", "critical", f"{claim}; about half: looks like {half}",
                       f"{test} column {index}", _LINK_REMEDY, str(index))
    return Finding("nvbandwidth-pcie-low", "critical", claim, f"{test} column {index}", _LINK_REMEDY, str(index))


def _per_gpu(matrix: NvbMatrix) -> dict[int, float]:
    return {col: value for _, col, value in matrix.cells()}


def _floor_findings(run: NvbRun, h2d: Floor, p2p: Floor | None, model: str) -> list[Finding]:
    floor = h2d.gbs
    found: list[Finding] = []
    checked = 0
    for test in _FLOOR_TESTS:
        matrix = run.matrix(test)
        if matrix is None:
            continue
        for index, value in _per_gpu(matrix).items():
            checked += 1
            if value >= floor:
                continue
            claim = f"{_gpu(run, index)}: {test} {value:g} GB/s is below the {floor:g} GB/s floor for {model} " \
                    f"of {_source(h2d)}"
            half = _HALF_OF_FLOOR[0] * floor <= value <= _HALF_OF_FLOOR[1] * floor
            found.append(_link_finding(test, index, claim, _HALF_LINK if half else None))
    p2p_found = _p2p_findings(run, p2p, model)
    if checked and not found:
        found.append(Finding("nvbandwidth-ok", "ok", f"host<->device copies of {checked} GPU measure(s) on {model} "
                             f"are at or above the {floor:g} GB/s floor of {_source(h2d)}",
                             " / ".join(t for t in _FLOOR_TESTS if run.matrix(t)), ""))
    return found + p2p_found


def _p2p_findings(run: NvbRun, p2p: Floor | None, model: str) -> list[Finding]:
    matrix = run.matrix(_P2P_TEST)
    if matrix is None or p2p is None:
        return []
    floor = p2p.gbs
    low = [(row, col, value) for row, col, value in matrix.cells() if value < floor]
    found = [Finding("nvbandwidth-p2p-low", "critical", f"GPU pair {row} -> {col}: {_P2P_TEST} {value:g} GB/s is "
                     f"below the {floor:g} GB/s NVLink floor for {model} of {_source(p2p)}",
                     f"{_P2P_TEST} row {row}, column {col}",
                     "Check NVLink: `nvidia-smi nvlink -s -i <gpu>` (links down or slower), `nvidia-smi nvlink -e` "
                     "error counters, fabric manager status (NVSwitch systems).", f"{row},{col}")
             for row, col, value in low]
    if matrix.cells() and not found:
        found.append(Finding("nvbandwidth-ok", "ok", f"{len(matrix.cells())} GPU pair(s) on {model} copy at or "
                             f"above the {floor:g} GB/s NVLink floor of {_source(p2p)}", _P2P_TEST, ""))
    return found


def peer_findings(run: NvbRun, named: set[str] | None = None) -> list[Finding]:
    """A GPU whose host<->device copy is well below the other GPUs' in the same test (no reference needed);
    GPUs already in `named` (index strings) are left to the floor findings."""
    found: list[Finding] = []
    named = named or set()
    for matrix in run.matrices:
        if matrix.direction not in ("h2d", "d2h"):
            continue
        values = _per_gpu(matrix)
        for index, value in values.items():
            others = [v for i, v in values.items() if i != index]
            if not others or str(index) in named or (median := statistics.median(others)) <= 0:
                continue
            ratio = value / median
            if ratio >= _BELOW_PEERS:
                continue
            test = matrix.testcase or matrix.description
            claim = f"{_gpu(run, index)}: {test} {value:g} GB/s is {ratio:.0%} of the other GPUs' median " \
                    f"{median:g} GB/s"
            half = _HALF_OF_PEERS[0] <= ratio <= _HALF_OF_PEERS[1]
            found.append(_link_finding(test, index, claim, _HALF_LINK if half else None))
            named.add(str(index))
    return found


def _failure(run: NvbRun) -> list[Finding]:
    if not run.failures:
        return []
    return [Finding("nvbandwidth-test-failed", "warning", f"nvbandwidth stopped in a testcase "
                    f"({', '.join(run.started[-1:]) or 'unnamed'}): {run.failures[0]}", " | ".join(run.failures[:3]),
                    "A data-check failure in a copy can be a GPU or link fault: rerun that testcase with "
                    "--bufferSize 64, then run dcgmi diag -r 3 on the node.")]


def _no_reference(run: NvbRun, model: str, why: str) -> Finding:
    measured = [m for m in run.matrices if m.unit == "GB/s" and m.cells()]
    seen = {i for m in measured for row, column, _ in m.cells() for i in (row, column)}  # a log without its device list
    count = (f"{len(run.devices)} GPU(s)" if run.devices else f"{max(seen) + 1} GPU(s) (counted from its matrices)"
             if seen else "an unknown number of GPU(s)")
    return Finding("nvbandwidth-no-reference", "warning",
                   f"nvbandwidth on {count} of "
                   f"{model or 'unnamed model'}: {why} - no verdict on its bandwidth",
                   f"testcases: {', '.join(m.testcase or '?' for m in measured)}",
                   "Give --expect-model naming the exact part (e.g. 'H100 SXM', 'A100 80GB PCIe', 'T4': "
                   "docs/gpu-models.md lists them and their floors), run host_to_device_memcpy_ce and "
                   "device_to_host_memcpy_ce, or compare with a known-good node of the same type.")


def nvbandwidth_findings(run: NvbRun, expect_model: str | None = None,
                         expect_gpus: int | None = None) -> list[Finding]:
    """Failed testcases, then each GPU and pair against the floors for the model (or say none applies), then each
    GPU against its peers. The GPU count is the capture's, else `expect_gpus`."""
    found = [*_failure(run), *model_mismatch("nvbandwidth", run.models[0] if run.models else None, expect_model)]
    model = expect_model or (run.models[0] if run.models else "")
    h2d, p2p, label = floors(model, len(run.devices) or expect_gpus) if model else (None, None, model)
    floor_found = _floor_findings(run, h2d, p2p, label) if h2d else []
    if floor_found:
        found += floor_found
    elif any(m.unit == "GB/s" and m.cells() for m in run.matrices):
        why = "no published or derived floor for this model" if identify(model) else "no published floor for this GPU"
        found.append(_no_reference(run, label, f"the floors cover {', '.join((*_FLOOR_TESTS, _P2P_TEST))} only"
                                   if h2d else why))
    named = {f.gpu for f in found if f.gpu and f.id.startswith("nvbandwidth-pcie")}
    return found + peer_findings(run, {n for n in named if n})
