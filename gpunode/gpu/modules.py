"""Open or proprietary NVIDIA kernel modules, chosen from the GPUs' PCI device ids and the driver branch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

# NVIDIA's open kernel modules support Turing and later GPUs only; Turing's device ids start at 0x1E00
# (TU102 0x1E02..). Pascal/Volta (e.g. V100 0x1DB1-0x1DB6, P100 0x15F8) need the proprietary modules.
# Blackwell (0x2900 and up) is supported by the open modules only.
# https://github.com/NVIDIA/open-gpu-kernel-modules#compatible-gpus
# From R560 on, NVIDIA's installers default to the open modules where the GPU supports them.
# https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ ("Open GPU Kernel Modules")
TURING_FIRST_ID = 0x1E00
BLACKWELL_FIRST_ID = 0x2900
OPEN_DEFAULT_FROM_BRANCH = 560

Flavor = Literal["open", "proprietary"]


def choose_kernel_modules(device_ids: Iterable[str], branch: int, forced: str = "auto") -> tuple[Flavor, str]:
    """(flavor, reason). `forced` is "open", "proprietary" or "auto"."""
    ids = [int(d, 16) for d in device_ids if d]
    if forced in ("open", "proprietary"):
        return forced, f"kernel_modules: {forced} was set"  # type: ignore[return-value]
    if any(i < TURING_FIRST_ID for i in ids):
        old = ", ".join(f"0x{i:04x}" for i in ids if i < TURING_FIRST_ID)
        return "proprietary", f"pre-Turing GPU(s) ({old}) are not supported by the open modules"
    if any(i >= BLACKWELL_FIRST_ID for i in ids):
        return "open", "Blackwell GPUs require the open kernel modules"
    if branch >= OPEN_DEFAULT_FROM_BRANCH:
        return "open", f"branch {branch} defaults to the open modules (all GPUs are Turing or newer)"
    return "proprietary", f"branch {branch} predates the open-module default (R{OPEN_DEFAULT_FROM_BRANCH})"
