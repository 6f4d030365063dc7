"""Versions read from installed packages: the NVIDIA driver (all its packages on one version), CUDA, the container
toolkit (what an image carries; the image steps check the driver with them)."""

from __future__ import annotations

import re

# Released on their own schedule, so their versions may differ from the driver's (Debian 12: nvidia-persistenced
# 535.171.04 with driver 535.309.01). Container-toolkit packages have 1.x versions and are never driver-like.
SEPARATELY_VERSIONED = ("nvidia-persistenced", "nvidia-settings", "nvidia-xconfig", "nvidia-modprobe")
_DRIVER_VERSION = re.compile(r"^(?:\d+:)?(\d{3}\.\d+(?:\.\d+)?)")
_CUDA_PACKAGE = re.compile(r"^cuda-(?:toolkit|cudart|runtime|libraries)-(\d+)-(\d+)$")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base")


def upstream_driver_version(version: str) -> str | None:
    """`535.309.01-0+deb12u1` -> `535.309.01`; None for versions that are not driver versions (1.17.8-1)."""
    match = _DRIVER_VERSION.match(version.strip())
    return match.group(1) if match else None


def driver_versions(packages: dict[str, str]) -> dict[str, list[str]]:
    """Driver packages grouped by upstream driver version: one key when the driver is consistent."""
    groups: dict[str, list[str]] = {}
    for name, version in sorted(packages.items()):
        if name in SEPARATELY_VERSIONED or not name.startswith(("nvidia", "libnvidia", "cuda-drivers", "kmod-nvidia")):
            continue
        upstream = upstream_driver_version(version)
        if upstream:
            groups.setdefault(upstream, []).append(name)
    return groups


def cuda_version(packages: dict[str, str]) -> str | None:
    """The newest CUDA toolkit/runtime installed as packages (`cuda-toolkit-12-4` -> `12.4`)."""
    found = [(int(m.group(1)), int(m.group(2))) for m in map(_CUDA_PACKAGE.match, packages) if m]
    return "{}.{}".format(*max(found)) if found else None


def toolkit_version(packages: dict[str, str]) -> str | None:
    """The NVIDIA container toolkit's package version, without the Debian revision."""
    for name in TOOLKIT_PACKAGES:
        if name in packages:
            return packages[name].split(":")[-1].split("-")[0]
    return None
