"""Distro adapters (one module per distro family): every distro fact gpunode relies on, each with the vendor file it
was checked against, and `for_os` that picks a host's adapter from its os-release ID (and ID_LIKE).

Steps, image builders and the lab ask an adapter; nothing outside this package names a distro id. Imports of the
adapters are deferred to first use (see `registry`), so `gpunode.facts` can read `identity` cheaply.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    **dict.fromkeys(("for_os", "example_login_user", "test_container_image",
                     "LAB", "DEFAULT_BASE", "QEMU_EXAMPLE_IMAGE", "AL2_IMAGE_IDS", "IMAGE_BASES", "AWS_IMAGE_BASES",
                     "AMI_FACTS", "base_os_ids"), "registry"),
    **dict.fromkeys(("Distro", "DriverPackages", "UnsupportedDistro", "kernel_flavour", "el_kernel_stem"), "base"),
    **dict.fromkeys(("AwsBase", "CloudBase", "ImageBase"), "image_base"),
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"gpunode.distros.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'gpunode.distros' has no attribute {name!r}")
