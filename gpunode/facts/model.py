"""Typed, immutable facts about one host, as gathered by scripts/facts.sh."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpunode.distros.versions import version_key
from gpunode.errors import GpunodeError
from gpunode.facts.sections import ALL, FIELD_SECTIONS
from gpunode.parsers.dkms import DkmsEntry

PACKAGE_MANAGERS = ("apt", "dnf", "yum", "zypper")
GPU_CLASS_PREFIX = "0x03"  # 0x030000 VGA controller, 0x030200 3D controller
NVSWITCH_CLASS_PREFIX = "0x0680"  # "bridge, other": NVSwitch


@dataclass(frozen=True)
class OsInfo:
    """Distribution identity from os-release, plus the machine architecture."""

    id: str = ""
    id_like: tuple[str, ...] = ()
    version_id: str = ""
    version_major: int | None = None
    pretty_name: str = ""
    family: str = "unknown"
    package_manager: str | None = None
    codename: str | None = None
    arch: str = ""


@dataclass(frozen=True)
class KernelInfo:
    """Running and installed kernels and the headers present for them."""

    running: str = ""
    installed: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    running_headers_present: bool = False
    module_dirs: tuple[str, ...] = ()
    package: str = ""   # the RPM owning /lib/modules/$(uname -r), e.g. kernel6.12 on AL2023 ("" on dpkg hosts)

    @property
    def pending(self) -> str | None:
        """The newest installed kernel with headers other than the running one: a reboot into it is pending (an
        earlier run upgraded). Not compared with the running kernel: a vendor or custom kernel may carry a higher
        version number."""
        ready = [k for k in self.installed if k in self.headers and k != self.running]
        return max(ready, key=version_key) if ready else None

    @property
    def next_boot(self) -> str:
        """The kernel a stock bootloader boots next: the newest installed one (GRUB's util/grub.d/10_linux.in makes
        `version_find_latest` of /boot/vmlinu[xz]-* its first entry, which GRUB_DEFAULT=0 boots; EL's kernel
        install makes the new kernel the default, /etc/sysconfig/kernel UPDATEDEFAULT=yes); the running one when
        none is listed. A GRUB_DEFAULT pinned to another entry is not read."""
        return max(self.installed, key=version_key) if self.installed else self.running


@dataclass(frozen=True)
class PciGpu:
    """One NVIDIA PCI function that is a GPU or an NVSwitch (from sysfs)."""

    slot: str
    device_id: str = ""
    subsystem_id: str = ""
    class_code: str = ""
    driver: str | None = None
    link_gen_current: int | None = None
    link_gen_max: int | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None
    is_nvswitch: bool = False
    numa_node: int | None = None

    @property
    def link_degraded(self) -> bool:
        """True when the link trained below its maximum speed or width."""
        return _below(self.link_gen_current, self.link_gen_max) or _below(
            self.link_width_current, self.link_width_max
        )


def _below(current: int | None, best: int | None) -> bool:
    return current is not None and best is not None and current < best


@dataclass(frozen=True)
class NvidiaInfo:
    """NVIDIA kernel driver state: loaded modules, DKMS, packages, services."""

    driver_version: str | None = None
    modules_loaded: tuple[str, ...] = ()
    nouveau_loaded: bool = False
    nouveau_blacklisted: bool = False
    nvidia_smi: str | None = None
    dkms: tuple[DkmsEntry, ...] = ()
    packages: dict[str, str] = field(default_factory=dict)
    fabricmanager_active: bool | None = None
    persistenced_active: bool | None = None
    open_kernel_module: bool | None = None
    blacklist_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockHolder:
    """A process holding (or having open) a package-manager lock file."""

    path: str
    pid: int
    command: str = ""
    comm: str = ""


@dataclass(frozen=True)
class ProcessInfo:
    """A running process of interest (package managers, cloud-init)."""

    pid: int
    comm: str = ""
    command: str = ""


@dataclass(frozen=True)
class PackageManagerInfo:
    """Whether the package manager is free to use right now."""

    lock_holders: tuple[LockHolder, ...] = ()
    cloud_init_running: bool = False
    reboot_required: bool = False
    managers_found: tuple[str, ...] = ()
    busy_processes: tuple[ProcessInfo, ...] = ()
    lock_files: tuple[str, ...] = ()
    dpkg_journal: bool = False             # /var/lib/dpkg/updates is not empty: dpkg was interrupted
    dpkg_unfinished: tuple[str, ...] = ()  # "package:status" left half-way (unpacked, half-configured...)
    yum_unfinished: bool = False           # /var/lib/yum/transaction-all.* left by an interrupted yum
    rhui_repo_files: tuple[str, ...] = ()   # /etc/yum.repos.d/*rhui*.repo: RHEL served by a cloud's RHUI
    rhsm_registered: bool = False           # /etc/pki/consumer/cert.pem: registered with subscription-manager

    @property
    def interrupted(self) -> str:
        """Why the package manager needs a repair before use ("" when it does not)."""
        reasons = []
        if self.dpkg_journal:
            reasons.append("dpkg was interrupted (/var/lib/dpkg/updates is not empty)")
        if self.dpkg_unfinished:
            reasons.append("packages left half-way: " + ", ".join(self.dpkg_unfinished))
        if self.yum_unfinished:
            reasons.append("yum left an unfinished transaction (/var/lib/yum/transaction-all.*)")
        return "; ".join(reasons)

    @property
    def locked(self) -> bool:
        """True when some process holds a package-manager lock."""
        return bool(self.lock_holders)


@dataclass(frozen=True)
class ContainerInfo:
    """Docker, containerd and the NVIDIA container toolkit."""

    docker_installed: bool = False
    docker_version: str | None = None
    daemon_json_text: str | None = None
    containerd_version: str | None = None
    containerd_nvidia_lines: tuple[str, ...] = ()
    containerd_dropins: tuple[str, ...] = ()
    toolkit_installed: bool = False
    cdi_specs: tuple[str, ...] = ()
    services: dict[str, tuple[str, str]] = field(default_factory=dict)
    runtime_config_present: bool = False


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mounts (octal escapes decoded)."""

    source: str
    target: str
    fstype: str
    options: str = ""

    @property
    def is_network(self) -> bool:
        """True for NFS, EFS, CIFS, Lustre and similar remote filesystems."""
        return self.fstype in {"nfs", "nfs4", "efs", "cifs", "smb3", "lustre", "ceph", "glusterfs"}


@dataclass(frozen=True)
class StorageInfo:
    """fstab, interesting mounts and free space."""

    fstab_text: str | None = None
    mounts: tuple[Mount, ...] = ()
    free_bytes: dict[str, int] = field(default_factory=dict)
    size_bytes: dict[str, int] = field(default_factory=dict)

    def mount_at(self, target: str) -> Mount | None:
        """The last mount on `target`, or None."""
        found = [m for m in self.mounts if m.target == target]
        return found[-1] if found else None


class FactsNotGathered(GpunodeError):
    """A field of a facts section this run did not gather was read, with no run lock left to gather it."""


@dataclass(frozen=True)
class Facts:
    """Everything facts.sh found on one host. `raw` keeps the script output.

    `sections` says which of facts.sh's sections the output holds (gpunode/facts/sections.py). Reading a field of
    another section gathers it first, through the loader the run lock attaches (`parse.attach_loader`); without one it
    raises FactsNotGathered: an empty default read as "nothing there" could make a step overwrite what is there.
    """

    os: OsInfo = field(default_factory=OsInfo)
    kernel: KernelInfo = field(default_factory=KernelInfo)
    gpus: tuple[PciGpu, ...] = ()
    nvswitch_present: bool = False
    nvidia: NvidiaInfo = field(default_factory=NvidiaInfo)
    secure_boot: bool | None = None
    pkg: PackageManagerInfo = field(default_factory=PackageManagerInfo)
    containers: ContainerInfo = field(default_factory=ContainerInfo)
    storage: StorageInfo = field(default_factory=StorageInfo)
    cloud_vendor: str | None = None
    dmi: dict[str, str] = field(default_factory=dict)
    boot_id: str = ""
    boot_marker: str = ""
    uptime_seconds: float | None = None
    uid: int | None = None
    user: str = ""
    container_virt: str | None = None
    installed_packages: dict[str, str] = field(default_factory=dict)
    raw: str = ""
    hostname: str = ""
    efi: bool = False
    vm_virt: str | None = None
    script_ms: float | None = None
    complete: bool = False
    sections: frozenset[str] = field(default=ALL, compare=False)

    def __getattribute__(self, name: str) -> Any:
        needs = FIELD_SECTIONS.get(name)
        if needs is not None and not needs <= object.__getattribute__(self, "sections"):
            object.__getattribute__(self, "_gather")(needs - object.__getattribute__(self, "sections"))
        return object.__getattribute__(self, name)

    def attach_gatherer(self, gatherer: Callable[[frozenset[str]], Facts] | None) -> None:
        """`gatherer(sections)` returns these facts with those sections added (None: nothing more can be gathered).
        The model never parses: gpunode.facts.parse.attach_loader makes a gatherer from a loader of facts.sh text."""
        object.__setattr__(self, "_gatherer", gatherer)

    def _gather(self, missing: frozenset[str]) -> None:
        gatherer = self.__dict__.get("_gatherer")
        if gatherer is None:
            raise FactsNotGathered(f"internal: facts section(s) {', '.join(sorted(missing))} were read but not "
                                   "gathered", fix="please report this with the host log")
        merged = gatherer(missing)
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, object.__getattribute__(merged, f.name))

    @property
    def gpu_count(self) -> int:
        """Number of GPUs (NVSwitches not counted)."""
        return sum(1 for g in self.gpus if not g.is_nvswitch)

    @property
    def nvswitch_count(self) -> int:
        """Number of NVSwitch PCI functions."""
        return sum(1 for g in self.gpus if g.is_nvswitch)

    def to_dict(self, *, include_raw: bool = False) -> dict[str, Any]:
        """JSON-serialisable dict (tuples become lists); `raw` only on request; fields of sections not gathered
        are left out (never gathered for this)."""
        have = self.sections
        data = {f.name: _plain(_as_plain_data(object.__getattribute__(self, f.name)))
                for f in dataclasses.fields(self) if FIELD_SECTIONS.get(f.name, have) <= have}
        data["sections"] = sorted(have)
        if not include_raw:
            data.pop("raw", None)
        if "gpu" in have:
            data["gpu_count"] = self.gpu_count
            data["nvswitch_count"] = self.nvswitch_count
        return data


def _as_plain_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return [_as_plain_data(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Recursively turn tuples into lists so json.dumps round-trips cleanly."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
