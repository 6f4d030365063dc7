"""Host facts: one read-only probe script (facts.sh) and a parser for its output."""

from gpunode.facts.model import (
    ContainerInfo,
    DkmsEntry,
    Facts,
    KernelInfo,
    LockHolder,
    Mount,
    NvidiaInfo,
    OsInfo,
    PackageManagerInfo,
    PciGpu,
    ProcessInfo,
    StorageInfo,
)
from gpunode.facts.osrelease import os_release_fields
from gpunode.facts.parse import parse_facts, parse_os_release
from gpunode.facts.pci import link_gen
from gpunode.facts.script import facts_script, facts_subshell
from gpunode.facts.vendor import cloud_vendor

__all__ = [
    "ContainerInfo",
    "DkmsEntry",
    "Facts",
    "KernelInfo",
    "LockHolder",
    "Mount",
    "NvidiaInfo",
    "OsInfo",
    "PackageManagerInfo",
    "PciGpu",
    "ProcessInfo",
    "StorageInfo",
    "cloud_vendor",
    "facts_script",
    "facts_subshell",
    "link_gen",
    "os_release_fields",
    "parse_facts",
    "parse_os_release",
]
