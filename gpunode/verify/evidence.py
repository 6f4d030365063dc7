"""Everything analyze() can look at, gathered from a host or from capture files."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode.parsers.lspci import PciDevice
from gpunode.parsers.lspci_vv import LinkState
from gpunode.parsers.model import SmiReport


@dataclass
class Expectations:
    """What the operator expects of the node (from the inventory)."""

    expect_gpus: int | None = None
    expect_model: str | None = None
    min_driver: str | None = None


@dataclass
class FabricManagerState:
    """nvidia-fabricmanager service state (NVSwitch systems)."""

    active: bool | None = None
    version: str | None = None


@dataclass
class ContainerTest:
    """Output and exit code of `docker run --rm --gpus all <image> nvidia-smi`."""

    output: str
    exit_code: int


@dataclass
class Evidence:
    """Facts for one host; every field is optional and checks skip what is missing."""

    smi: SmiReport | None = None
    smi_error: str | None = None
    pci_devices: list[PciDevice] | None = None
    kernel_log: str | None = None
    expectations: Expectations = field(default_factory=Expectations)
    fabricmanager: FabricManagerState | None = None
    dkms_status: list[str] | None = None
    running_kernel: str | None = None
    # the kernel a stock bootloader boots next (the newest installed: facts KernelInfo.next_boot) and whether its
    # headers are installed; None: not known
    next_boot_kernel: str | None = None
    next_boot_headers: bool | None = None
    # gpunode's kernel guard's record (/var/lib/gpunode/kernel-guard.state: kernel, missing, kept, boot_default); None:
    # none (no kernel was installed without its module, or the guard is not installed)
    kernel_guard: dict[str, str] | None = None
    # headers for the running kernel: "installed", "candidate VERSION", "candidate (none)" (apt knows no such
    # package: a remedy must not tell to install it) or None (not known)
    running_headers: str | None = None
    # the nvidia module file for the running kernel (`modinfo -n`; "" none) and the installed precompiled modules
    # packages for it (Ubuntu linux-modules-nvidia-*-<kver>, EL kmod-nvidia-<ver>-<kernel>); None: not known
    running_module: str | None = None
    precompiled_modules: list[str] | None = None
    nouveau_loaded: bool | None = None
    container_test: ContainerTest | None = None
    link_states: list[LinkState] | None = None  # from `lspci -vv`
    dcgmi: str | None = None  # `dcgmi diag` result tables
    nccl_tests: str | None = None  # nccl-tests output (all_reduce_perf ...)
    nvbandwidth: str | None = None  # nvbandwidth output (copy bandwidth matrices)
    dev_char: str | None = None  # dev_char_links.sh lines: each NVIDIA device's /dev/char link (None: not looked)

    @property
    def pci_gpus(self) -> list[PciDevice] | None:
        """NVIDIA GPUs on the PCI bus, or None when the bus was not inspected."""
        return None if self.pci_devices is None else [d for d in self.pci_devices if not d.is_nvswitch]

    @property
    def nvswitches(self) -> list[PciDevice]:
        return [d for d in self.pci_devices or [] if d.is_nvswitch]
