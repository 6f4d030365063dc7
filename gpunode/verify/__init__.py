"""Offline analysis of GPU evidence behind `gpunode verify-gpu` and `gpunode diagnose`."""

from gpunode.verify.checks import analyze, is_healthy
from gpunode.verify.detect import detect_kind
from gpunode.verify.diagnose import DiagnoseResult, FileResult, diagnose_files
from gpunode.verify.errors import SmiParseError
from gpunode.verify.evidence import ContainerTest, Evidence, Expectations, FabricManagerState
from gpunode.verify.kernel_log import XID_MEANINGS, scan_kernel_log
from gpunode.verify.lspci import PciDevice, classify_pci, parse_lspci
from gpunode.verify.model import Finding, GpuInfo, SmiReport
from gpunode.verify.report import HostReport, junit_xml, verify_report
from gpunode.verify.smi_csv import parse_smi_csv, parse_smi_list
from gpunode.verify.smi_table import parse_smi_table
from gpunode.verify.smi_text import parse_smi_text
from gpunode.verify.smi_xml import parse_smi_xml

__all__ = [
    "XID_MEANINGS", "ContainerTest", "DiagnoseResult", "Evidence", "Expectations", "FabricManagerState",
    "FileResult", "Finding", "GpuInfo", "HostReport", "PciDevice", "SmiParseError", "SmiReport", "analyze",
    "classify_pci",
    "detect_kind", "diagnose_files", "is_healthy", "junit_xml", "parse_lspci", "parse_smi_csv",
    "parse_smi_list", "parse_smi_table", "parse_smi_text", "parse_smi_xml", "scan_kernel_log",
    "verify_report",
]
