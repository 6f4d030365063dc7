"""Recognise what a capture file is from its content."""

from __future__ import annotations

import re

from gpunode.parsers.errors_text import has_user_space_error
from gpunode.parsers.kernel_log import has_kernel_markers
from gpunode.parsers.lspci import is_lspci_line
from gpunode.parsers.nccl_tests import is_nccl_tests
from gpunode.parsers.nvbandwidth import is_nvbandwidth
from gpunode.parsers.smi_csv import csv_query_kind
from gpunode.parsers.smi_list import is_smi_list
from gpunode.parsers.smi_table import TABLE_ROW
from gpunode.parsers.smi_text import is_gpu_fragment

KINDS = ("smi-xml", "smi-text", "smi-table", "smi-csv", "smi-list", "lspci", "kernel-log", "error-text",
         "nccl-tests", "nvbandwidth", "unknown")
_TABLE_BANNER = re.compile(r"^[ \t]*\|\s*NVIDIA-SMI\s+\S+", re.M)
_TEXT_HEADER = re.compile(r"^Driver Version\s+: \S+", re.M)
_TEXT_ATTACHED = re.compile(r"^Attached GPUs\s+: \d+", re.M)


def detect_kind(text: str) -> str:
    """The kind of capture text is: one of KINDS ("unknown" when nothing matches)."""
    head = text[:4000]
    if "<nvidia_smi_log" in text:  # anywhere: an inline `--dtd` DTD pushes it past the first kilobytes
        return "smi-xml"
    if "==============NVSMI LOG==============" in head or (
            _TEXT_HEADER.search(head) and _TEXT_ATTACHED.search(head)):
        return "smi-text"
    if _TABLE_BANNER.search(text) or TABLE_ROW.search(text):
        return "smi-table"
    if is_nccl_tests(text):
        return "nccl-tests"
    if is_nvbandwidth(text):
        return "nvbandwidth"
    lines = [line for line in text.splitlines() if line.strip()]
    if is_smi_list(text):
        return "smi-list"
    if csv_query_kind(text):
        return "smi-csv"
    pci_lines = sum(1 for line in lines if is_lspci_line(line))
    if pci_lines and pci_lines * 2 >= len(lines):
        return "lspci"
    if is_gpu_fragment(text):
        return "smi-text"
    if has_user_space_error(text):
        return "error-text"
    if has_kernel_markers(text):
        return "kernel-log"
    return "unknown"
