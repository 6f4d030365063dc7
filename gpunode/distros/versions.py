"""The one version order of gpunode (package versions, kernel releases, driver versions)."""

from __future__ import annotations

import re


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Natural sort key: "5.15.0-1051-aws" sorts after "5.15.0-105-aws". The one version order of gpunode."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", version) if p)
