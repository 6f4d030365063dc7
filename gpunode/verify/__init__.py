"""Offline analysis of GPU evidence behind `gpunode verify-gpu` and `gpunode diagnose`.

The names below are loaded on first use (PEP 562): `from gpunode.verify import Expectations` reads one module, not
every parser, the kernel-log catalogue and the report writers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SOURCES = {
    "analyze": "gpunode.verify.checks.analyze",
    "is_healthy": "gpunode.verify.checks.analyze",
    "detect_kind": "gpunode.verify.captures.detect",
    "DiagnoseResult": "gpunode.verify.diagnose",
    "FileResult": "gpunode.verify.diagnose",
    "diagnose_files": "gpunode.verify.diagnose",
    "SmiParseError": "gpunode.parsers.errors",
    "ContainerTest": "gpunode.verify.evidence",
    "Evidence": "gpunode.verify.evidence",
    "Expectations": "gpunode.verify.evidence",
    "FabricManagerState": "gpunode.verify.evidence",
    "XID_MEANINGS": "gpunode.parsers.kernel_log",
    "scan_kernel_log": "gpunode.parsers.kernel_log",
    "PciDevice": "gpunode.parsers.lspci",
    "classify_pci": "gpunode.parsers.lspci",
    "parse_lspci": "gpunode.parsers.lspci",
    "Finding": "gpunode.parsers.model",
    "GpuInfo": "gpunode.parsers.model",
    "SmiReport": "gpunode.parsers.model",
    "HostReport": "gpunode.verify.report",
    "junit_xml": "gpunode.verify.report",
    "verify_report": "gpunode.verify.report",
    "parse_smi_csv": "gpunode.parsers.smi_csv",
    "parse_smi_list": "gpunode.parsers.smi_list",
    "parse_smi_table": "gpunode.parsers.smi_table",
    "parse_smi_text": "gpunode.parsers.smi_text",
    "parse_smi_xml": "gpunode.parsers.smi_xml",
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
    value = getattr(importlib.import_module(_SOURCES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from gpunode.parsers.errors import SmiParseError
    from gpunode.parsers.kernel_log import XID_MEANINGS, scan_kernel_log
    from gpunode.parsers.lspci import PciDevice, classify_pci, parse_lspci
    from gpunode.parsers.model import Finding, GpuInfo, SmiReport
    from gpunode.parsers.smi_csv import parse_smi_csv
    from gpunode.parsers.smi_list import parse_smi_list
    from gpunode.parsers.smi_table import parse_smi_table
    from gpunode.parsers.smi_text import parse_smi_text
    from gpunode.parsers.smi_xml import parse_smi_xml
    from gpunode.verify.captures.detect import detect_kind
    from gpunode.verify.checks.analyze import analyze, is_healthy
    from gpunode.verify.diagnose import DiagnoseResult, FileResult, diagnose_files
    from gpunode.verify.evidence import ContainerTest, Evidence, Expectations, FabricManagerState
    from gpunode.verify.report import HostReport, junit_xml, verify_report
