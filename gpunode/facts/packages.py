"""Package versions as plans compare them: "at least", and the upstream part of a distro version."""

from __future__ import annotations

import re

from gpunode.distros.versions import version_key


def version_at_least(version: str, minimum: str) -> bool:
    """True when `version` (an upstream version such as 570.148.08) is `minimum` or newer."""
    return version_key(version) >= version_key(minimum)


def upstream_version(version: str) -> str:
    """Strip a Debian epoch and the packaging revision: "5:26.1.3-1~deb12u1" -> "26.1.3"."""
    version = re.sub(r"^\d+:", "", version.split(", ")[-1])
    return version.split("-", 1)[0]
