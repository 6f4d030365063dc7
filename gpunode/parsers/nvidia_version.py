"""`/proc/driver/nvidia/version`: the loaded NVIDIA kernel module's version and flavour."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class NvidiaModuleVersion:
    """The loaded module: its version (None if the file names none) and whether it is the open kernel module."""

    version: str | None = None
    open_kernel_module: bool = False


def parse_proc_version(text: str) -> NvidiaModuleVersion:
    """`NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01 ...` or `NVRM version: NVIDIA UNIX Open Kernel
    Module for x86_64  570.148.08 ...`."""
    match = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", text)
    return NvidiaModuleVersion(match.group(1) if match else None, "Open Kernel Module" in text)
