"""Merge nvidia-smi reports by GPU identity: one GPU seen in several sections, files or samples is one GPU."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gpunode.parsers.model import GpuInfo, SmiReport
from gpunode.parsers.smi_values import normalize_bus_id

# Richest report first: its values win when two sources disagree.
_RANK = {"xml": 0, "text": 1, "csv": 2, "table": 3, "list": 4}
_ANY_TRUE = ("retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure")
_MAXIMUM = ("ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate", "remapped_rows_uncorrectable")
_UNION = ("throttle_reasons_active", "unknown_error_fields", "lost_fields")


def same_gpu(a: GpuInfo, b: GpuInfo) -> bool:
    """UUID decides when both have one (unless both PCI bus ids are known and differ: a UUID anonymised to one
    placeholder); else the PCI bus id; else the index."""
    bus_a, bus_b = normalize_bus_id(a.pci_bus_id), normalize_bus_id(b.pci_bus_id)
    if a.uuid and b.uuid:
        same_bus = not (bus_a and bus_b) or bus_a.split(".")[0] == bus_b.split(".")[0]
        return a.uuid.lower() == b.uuid.lower() and same_bus
    if bus_a and bus_b:
        return bus_a.split(".")[0] == bus_b.split(".")[0]
    return a.index is not None and a.index == b.index


def merge_gpu(into: GpuInfo, other: GpuInfo) -> None:
    """Fill into's missing facts from other; keep the worst of the health signals; count the samples."""
    for item in dataclasses.fields(GpuInfo):
        rule = _RULES.get(item.name, _first_known)
        setattr(into, item.name, rule(getattr(into, item.name), getattr(other, item.name)))


def _first_known(mine: Any, theirs: Any) -> Any:
    """Most facts: the first source's value, the other's where the first has none."""
    return mine if mine is not None else theirs


def _total(mine: int, theirs: int) -> int:
    """samples: how many samples the two stand for."""
    return mine + theirs


def _any_true(mine: bool | None, theirs: bool | None) -> bool | None:
    """A pending retirement or remap seen in either source is pending."""
    return True if (mine or theirs) else _first_known(mine, theirs)


def _maximum(mine: int | None, theirs: int | None) -> int | None:
    """Error counts: the higher one (a later sample has counted more)."""
    known = [v for v in (mine, theirs) if v is not None]
    return max(known) if known else None


def _union(mine: list[str], theirs: list[str]) -> list[str]:
    """Lists of names (throttle reasons, error and lost fields): every name once, in order of first sight."""
    return [*mine, *(v for v in theirs if v not in mine)]


def _false_wins(mine: bool | None, theirs: bool | None) -> bool | None:
    """inforom_ok: corrupted in either source is corrupted."""
    return False if False in (mine, theirs) else _first_known(mine, theirs)


def _narrowest(mine: int | None, theirs: int | None) -> int | None:
    """pcie_width_current: the narrower link (a degraded sample shows it)."""
    known = [v for v in (mine, theirs) if v]
    return min(known) if known else mine


# How each field of GpuInfo merges when it is not _first_known.
_RULES: dict[str, Callable[[Any, Any], Any]] = {
    "samples": _total,
    **dict.fromkeys(_ANY_TRUE, _any_true),
    **dict.fromkeys(_MAXIMUM, _maximum),
    **dict.fromkeys(_UNION, _union),
    "inforom_ok": _false_wins,
    "pcie_width_current": _narrowest,
}


def merge_reports(reports: list[SmiReport]) -> SmiReport | None:
    """One report of every GPU of every report (richest source first), GPUs merged by identity."""
    if not reports:
        return None
    ordered = sorted(reports, key=lambda r: _RANK[r.source_kind])
    first = ordered[0]
    merged = SmiReport(first.driver_version, first.cuda_version, first.attached_gpus,
                       [dataclasses.replace(g, throttle_reasons_active=list(g.throttle_reasons_active),
                                            unknown_error_fields=list(g.unknown_error_fields),
                                            lost_fields=list(g.lost_fields)) for g in first.gpus],
                       first.source_kind, first.schema_version, first.timestamp, list(first.warnings))
    merged.missing = list(first.missing)
    merged.error_fields = list(first.error_fields)
    for report in ordered[1:]:
        _absorb(merged, report)
    _collapse(merged)
    return merged


def _absorb(merged: SmiReport, report: SmiReport) -> None:
    merged.driver_version = merged.driver_version or report.driver_version
    merged.cuda_version = merged.cuda_version or report.cuda_version
    merged.schema_version = merged.schema_version or report.schema_version
    if merged.attached_gpus is None or (report.attached_gpus or 0) > merged.attached_gpus:
        merged.attached_gpus = report.attached_gpus if report.attached_gpus is not None else merged.attached_gpus
    merged.warnings += [w for w in report.warnings if w not in merged.warnings]
    merged.missing += [m for m in report.missing if m not in merged.missing]
    merged.error_fields += [e for e in report.error_fields if e not in merged.error_fields]
    for gpu in report.gpus:
        twin = next((g for g in merged.gpus if same_gpu(g, gpu)), None)
        if twin is None:
            merged.gpus.append(dataclasses.replace(gpu))
        else:
            merge_gpu(twin, gpu)


def _collapse(report: SmiReport) -> None:
    """GPUs of one report that are the same GPU (a time series, one UUID in two sections) become one."""
    kept: list[GpuInfo] = []
    for gpu in report.gpus:
        twin = next((g for g in kept if same_gpu(g, gpu)), None)
        if twin is None:
            kept.append(gpu)
        else:
            merge_gpu(twin, gpu)
    report.gpus = kept
