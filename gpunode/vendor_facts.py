"""Facts taken from a vendor's own code or docs, each kept beside where it was read.

A fact about a vendor (an AMI name pattern, a package, a repository path, a config key, an API enum) is only as
good as its source. Tables of such facts are built from `Fact`s and registered with `fact_table`, so that
`tests/test_vendor_facts.py` can check that every entry names its source, and a reviewer can re-check any fact in a
minute: open the file at that commit and line, or the page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_REF = re.compile(r"^([0-9a-f]{7,40}|v?\d[\w.+-]*|[\w./-]+)$")
_LINE = re.compile(r"^\d+(-\d+)?$")


@dataclass(frozen=True)
class Source:
    """Where a fact was read: a file of a public repository (repo, path, ref, line) or a documentation page (url)."""

    repo: str = ""   # owner/name, as GitHub spells it
    path: str = ""   # the file inside the repository
    ref: str = ""    # the commit (or tag) the file was read at
    line: str = ""   # a line or a range: "42", "40-52"
    url: str = ""    # a documentation page, instead of (or besides) a repository file

    def problems(self) -> list[str]:
        """What keeps a reviewer from re-checking this source; empty when it is complete."""
        if self.url and not self.repo:
            return [] if self.url.startswith("https://") else [f"url {self.url!r} is not an https address"]
        found = []
        if not _REPO.match(self.repo):
            found.append(f"repo {self.repo!r} is not owner/name")
        if not self.path:
            found.append("no path")
        if not _REF.match(self.ref):
            found.append(f"ref {self.ref!r} is not a commit or tag")
        if not _LINE.match(self.line):
            found.append(f"line {self.line!r} is not a line or range")
        return found

    def __str__(self) -> str:
        if self.repo:
            where = f"{self.repo} {self.path}@{self.ref}:{self.line}"
            return f"{where} ({self.url})" if self.url else where
        return self.url


@dataclass(frozen=True)
class Pin:
    """A vendor repository read at one commit: `Pin(repo, ref).at(path, line)` is a Source in it."""

    repo: str
    ref: str

    def at(self, path: str, line: str) -> Source:
        return Source(self.repo, path, self.ref, line)


# Repositories that several fact tables (the distro adapters, the driver's own table) read at the same commit: one
# pin each, so a re-check moves them all together.
NVIDIA_DRIVER_ROLE = Pin("NVIDIA/ansible-role-nvidia-driver", "f68d4a709d4a8c25c9d951538e35740174d3db91")
DEEPOPS = Pin("NVIDIA/deepops", "3957a42fb9af0b09c91b6d2ac9dc7925daf00523")
EKS_AMI = Pin("awslabs/amazon-eks-ami", "81fec2e895854f599974fe4d3d72f61c0a9aaffa")
GPU_DRIVER_CONTAINER = Pin("NVIDIA/gpu-driver-container", "06a208ca9747c82b1ba99b76ecdcf2469b0a0207")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One vendor fact and where it was read."""

    value: T
    source: Source
    note: str = ""   # what the source says around it, in our words (never the vendor's code)


TABLES: dict[str, Mapping[str, Fact]] = {}


def fact_table(name: str, table: Mapping[str, Fact[Any]]) -> Mapping[str, Fact[Any]]:
    """Register a table of vendor facts under `name` (one per vendor or distro) and return it. Its facts hold values
    of several types (a name, a list, a mapping), so the table is typed by entry as `Fact[Any]`."""
    if name in TABLES and TABLES[name] is not table:
        raise ValueError(f"vendor fact table {name!r} is registered twice")
    TABLES[name] = table
    return table


def value(table: Mapping[str, Fact[T]], key: str) -> T:
    """The value of one entry of a fact table."""
    return table[key].value
