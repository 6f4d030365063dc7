"""Versions of packages, and the facts' view of the named parsers (gpunode.parsers): package lines, `dkms status`,
`systemctl show`."""

from __future__ import annotations

import re

from gpunode.facts.model import DkmsEntry
from gpunode.parsers import dkms
from gpunode.parsers.dkms import dkms_installed
from gpunode.parsers.packages import parse_package_lines, version_key
from gpunode.parsers.systemd import parse_units as parse_systemctl_show

__all__ = ["dkms_installed", "parse_dkms", "parse_package_lines", "parse_systemctl_show", "upstream_version",
           "version_at_least", "version_key"]


def version_at_least(version: str, minimum: str) -> bool:
    """True when `version` (an upstream version such as 570.148.08) is `minimum` or newer."""
    return version_key(version) >= version_key(minimum)


def upstream_version(version: str) -> str:
    """Strip a Debian epoch and the packaging revision: "5:26.1.3-1~deb12u1" -> "26.1.3"."""
    version = re.sub(r"^\d+:", "", version.split(", ")[-1])
    return version.split("-", 1)[0]


def parse_dkms(text: str | None) -> tuple[DkmsEntry, ...]:
    """`dkms status` entries (gpunode.parsers.dkms) as the facts' DkmsEntry values."""
    return tuple(DkmsEntry(e.module, e.version, e.kernel, e.arch, e.status, e.line) for e in dkms.parse_dkms(text))
