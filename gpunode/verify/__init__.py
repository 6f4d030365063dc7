"""Offline analysis of GPU evidence behind `gpunode verify-gpu` and `gpunode diagnose`.

The names below are loaded on first use (PEP 562): `from gpunode.verify import Expectations` reads one module, not
every parser, the kernel-log catalogue and the report writers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SOURCES = {
    "analyze": "checks", "is_healthy": "checks",
    "detect_kind": "detect",
    "DiagnoseResult": "diagnose", "FileResult": "diagnose", "diagnose_files": "diagnose",
    "SmiParseError": "errors",
    "ContainerTest": "evidence", "Evidence": "evidence", "Expectations": "evidence", "FabricManagerState": "evidence",
    "XID_MEANINGS": "kernel_log", "scan_kernel_log": "kernel_log",
    "PciDevice": "lspci", "classify_pci": "lspci", "parse_lspci": "lspci",
    "Finding": "model", "GpuInfo": "model", "SmiReport": "model",
    "HostReport": "report", "junit_xml": "report", "verify_report": "report",
    "parse_smi_csv": "smi_csv", "parse_smi_list": "smi_list",
    "parse_smi_table": "smi_table",
    "parse_smi_text": "smi_text",
    "parse_smi_xml": "smi_xml",
}

__all__ = [
    "XID_MEANINGS", "ContainerTest", "DiagnoseResult", "Evidence", "Expectations", "FabricManagerState",
    "FileResult", "Finding", "GpuInfo", "HostReport", "PciDevice", "SmiParseError", "SmiReport", "analyze",
    "classify_pci",
    "detect_kind", "diagnose_files", "is_healthy", "junit_xml", "parse_lspci", "parse_smi_csv",
    "parse_smi_list", "parse_smi_table", "parse_smi_text", "parse_smi_xml", "scan_kernel_log",
    "verify_report",
]


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_SOURCES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from gpunode.verify.checks import analyze, is_healthy
    from gpunode.verify.detect import detect_kind
    from gpunode.verify.diagnose import DiagnoseResult, FileResult, diagnose_files
    from gpunode.verify.errors import SmiParseError
    from gpunode.verify.evidence import ContainerTest, Evidence, Expectations, FabricManagerState
    from gpunode.verify.kernel_log import XID_MEANINGS, scan_kernel_log
    from gpunode.verify.lspci import PciDevice, classify_pci, parse_lspci
    from gpunode.verify.model import Finding, GpuInfo, SmiReport
    from gpunode.verify.report import HostReport, junit_xml, verify_report
    from gpunode.verify.smi_csv import parse_smi_csv
    from gpunode.verify.smi_list import parse_smi_list
    from gpunode.verify.smi_table import parse_smi_table
    from gpunode.verify.smi_text import parse_smi_text
    from gpunode.verify.smi_xml import parse_smi_xml
