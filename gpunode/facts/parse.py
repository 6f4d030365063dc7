"""Turn the text printed by scripts/facts.sh into a `Facts` value."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from gpunode.distros.versions import version_key
from gpunode.facts.blocks import Blocks, combine, read_blocks
from gpunode.facts.model import (
    ContainerInfo,
    Facts,
    KernelInfo,
    LockHolder,
    Mount,
    NvidiaInfo,
    OsInfo,
    PackageManagerInfo,
    ProcessInfo,
    StorageInfo,
)
from gpunode.facts.osrelease import parse_os_release, pick_package_manager
from gpunode.facts.packages import upstream_version
from gpunode.facts.pci import pci_gpus
from gpunode.facts.sections import ALL
from gpunode.facts.vendor import cloud_vendor
from gpunode.parsers.cmdline import blacklisted_modules
from gpunode.parsers.containers import containerd_version, dockerd_version
from gpunode.parsers.dkms import parse_dkms
from gpunode.parsers.locks import parse_holder, parse_proc
from gpunode.parsers.mounts import parse_mounts
from gpunode.parsers.nvidia_version import parse_proc_version
from gpunode.parsers.packages import parse_package_lines
from gpunode.parsers.systemd import parse_units as parse_systemctl_show

__all__ = ["attach_loader", "parse_facts", "parse_os_release"]

DOCKER_PACKAGES = ("docker-ce", "docker.io", "docker", "moby-engine", "docker-engine")
CONTAINERD_PACKAGES = ("containerd.io", "containerd", "moby-containerd")
TOOLKIT_BINS = ("nvidia-ctk", "nvidia-container-runtime", "nvidia-container-toolkit")


def attach_loader(facts: Facts, loader: Callable[[frozenset[str]], str] | None) -> None:
    """Reading a section `facts` lacks gathers it: `loader(sections)` returns facts.sh's output for those sections,
    parsed here together with what `facts` holds (None: nothing more can be gathered, reading one is an error)."""
    if loader is None:
        facts.attach_gatherer(None)
    else:
        facts.attach_gatherer(lambda missing: parse_facts(combine(facts.raw, loader(missing))))


def parse_facts(text: str) -> Facts:
    """Parse facts.sh output. Missing sections give empty defaults; only a missing marker raises."""
    b = read_blocks(text)
    packages = _installed_packages(b)
    units = parse_systemctl_show(b.text("systemctl"))
    dmi = {k: v[-1].strip() for k, v in b.kv.get("dmi", {}).items() if v}
    gpus = pci_gpus(b)
    boot_id = b.get("host", "boot_id").strip()
    pid1_start = b.get("host", "pid1_starttime").strip()
    return Facts(
        os=_os(b),
        kernel=_kernel(b),
        gpus=gpus,
        nvswitch_present=any(g.is_nvswitch for g in gpus),
        nvidia=_nvidia(b, packages, units),
        secure_boot=_secure_boot(b),
        pkg=_pkg(b),
        containers=_containers(b, packages, units),
        storage=_storage(b),
        cloud_vendor=cloud_vendor(dmi),
        dmi=dmi,
        boot_id=boot_id,
        boot_marker=boot_id + (f":{pid1_start}" if pid1_start else "") if boot_id else "",
        uptime_seconds=_float(b.get("host", "uptime")),
        uid=_int(b.get("host", "uid")),
        user=b.get("host", "user").strip(),
        container_virt=_container_virt(b),
        installed_packages=packages,
        raw=text,
        hostname=b.get("host", "hostname").strip(),
        efi=b.get("host", "efi") == "1",
        vm_virt=_none_if_empty(b.get("host", "virt_vm")),
        script_ms=_script_ms(b),
        complete=b.complete,
        sections=_sections(b),
    )


def _sections(b: Blocks) -> frozenset[str]:
    """The sections the output holds: all of them when facts.sh did not say (an output from before sections)."""
    named = frozenset(b.all("gathered", "section"))
    return named & ALL if named else ALL


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _none_if_empty(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "none") else text


def _os(b: Blocks) -> OsInfo:
    text = b.text("file /etc/os-release")
    if text is None:
        text = b.text("file /usr/lib/os-release") or ""
    info = parse_os_release(text, arch=b.get("host", "arch").strip())
    tools = tuple(b.all("pkgmgr", "has"))
    return dataclasses.replace(info, package_manager=pick_package_manager(info.package_manager, tools))


def _kernel(b: Blocks) -> KernelInfo:
    images = [v for v in b.all("kernel", "image") if "rescue" not in v]
    module_dirs = b.all("kernel", "modules_dir")
    headers = set(b.all("kernel", "build_ok")) | set(b.all("kernel", "src_kernel"))
    headers |= {d.removeprefix("linux-headers-") for d in b.all("kernel", "headers_dir")}
    return KernelInfo(
        running=b.get("host", "kernel").strip(),
        installed=tuple(sorted(set(images or module_dirs), key=version_key)),
        headers=tuple(sorted(headers, key=version_key)),
        running_headers_present=b.get("kernel", "running_build") == "1",
        module_dirs=tuple(sorted(set(module_dirs), key=version_key)),
        package=kernel_package_name(b.all("kernel", "running_package")),
    )


def kernel_package_name(owners: list[str]) -> str:
    """The kernel's base package from the RPMs owning /lib/modules/<running>: kernel, kernel6.12, kernel6.18.

    Sub-packages (kernel-core, kernel6.12-modules-extra...) map to their base; "" when rpm owns nothing.
    """
    bases = {re.sub(r"-(core|modules.*)$", "", name) for name in owners}
    bases = {b for b in bases if re.fullmatch(r"kernel[\d.]*", b)}
    return min(bases, key=len) if bases else ""


def _installed_packages(b: Blocks) -> dict[str, str]:
    names = b.raw_names("packages")
    if not names:
        return {}
    tool = names[0].partition(" ")[2]
    return parse_package_lines(b.text(names[0]), tool)


def _unit_active(units: dict[str, dict[str, str]], unit: str, known: bool) -> bool | None:
    if not known:
        return None
    props = units.get(unit)
    if not props:
        return False
    return props.get("LoadState") != "not-found" and props.get("ActiveState") == "active"


def _nvidia(b: Blocks, packages: dict[str, str], units: dict[str, dict[str, str]]) -> NvidiaInfo:
    proc_version = b.text("file /proc/driver/nvidia/version")
    loaded = parse_proc_version(proc_version) if proc_version else None
    version = (loaded and loaded.version) or b.get("nvidia", "module_version").strip() or None
    modules = tuple(b.all("nvidia", "module"))
    blacklist_files = tuple(sorted(set(b.all("nvidia", "blacklist_nouveau"))))  # in name order, whatever the script
    known = bool(units)
    return NvidiaInfo(
        driver_version=version,
        modules_loaded=modules,
        nouveau_loaded="nouveau" in modules,
        nouveau_blacklisted=bool(blacklist_files) or "nouveau" in blacklisted_modules(b.get("host", "cmdline")),
        nvidia_smi=b.get("nvidia", "nvidia_smi").strip() or None,
        dkms=parse_dkms(b.text("dkms")),
        packages={n: v for n, v in packages.items() if "nvidia" in n or n.startswith("cuda")},
        fabricmanager_active=_unit_active(units, "nvidia-fabricmanager.service", known),
        persistenced_active=_unit_active(units, "nvidia-persistenced.service", known),
        open_kernel_module=loaded.open_kernel_module if loaded else None,
        blacklist_files=blacklist_files,
    )


def _secure_boot(b: Blocks) -> bool | None:
    if b.get("host", "efi") != "1":
        return None
    return {"1": True, "0": False}.get(b.get("host", "secure_boot").strip())


def _procs(b: Blocks) -> dict[int, ProcessInfo]:
    procs = {}
    for proc in filter(None, map(parse_proc, b.all("procs", "proc"))):
        procs[proc.pid] = ProcessInfo(pid=proc.pid, comm=proc.comm, command=proc.command)
    return procs


def _pkg(b: Blocks) -> PackageManagerInfo:
    procs = _procs(b)
    holders: dict[tuple[str, int], LockHolder] = {}
    for path, pid in filter(None, map(parse_holder, b.all("pkgmgr", "holder"))):
        proc = procs.get(pid, ProcessInfo(pid=pid))
        holder = LockHolder(path=path, pid=pid, command=proc.command or proc.comm, comm=proc.comm)
        holders.setdefault((path, pid), holder)
    exists = {}
    for value in b.all("pkgmgr", "exists"):
        path, _, flag = value.rpartition("\t")
        exists[path] = flag == "1"
    cloud_init_proc = any(p.comm.startswith("cloud-init") for p in procs.values())
    cloud_init_pending = (
        bool(b.get("pkgmgr", "cloud_init_bin").strip())
        and exists.get("/run/cloud-init/status.json", False)
        and not exists.get("/run/cloud-init/result.json", False)
        and not exists.get("/etc/cloud/cloud-init.disabled", False)
    )
    return PackageManagerInfo(
        lock_holders=tuple(holders.values()),
        cloud_init_running=cloud_init_proc or cloud_init_pending,
        reboot_required=b.get("pkgmgr", "reboot_required") == "1",
        managers_found=tuple(b.all("pkgmgr", "has")),
        busy_processes=tuple(procs.values()),
        lock_files=tuple(b.all("pkgmgr", "lock_file")),
        dpkg_journal=b.get("pkgmgr", "dpkg_journal") == "1",
        dpkg_unfinished=tuple(b.get("pkgmgr", "dpkg_unfinished").split()),
        yum_unfinished=b.get("pkgmgr", "yum_unfinished") == "1",
        rhui_repo_files=tuple(b.all("pkgmgr", "rhui_repo")),
        rhsm_registered=b.get("pkgmgr", "rhsm_registered") == "1",
    )


def _bins(b: Blocks) -> dict[str, str]:
    bins = {}
    for value in b.all("containers", "bin"):
        name, _, path = value.partition("\t")
        bins[name] = path
    return bins


def _first_version(packages: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in packages:
            return upstream_version(packages[name])
    return None


def _containers(b: Blocks, packages: dict[str, str], units: dict[str, dict[str, str]]) -> ContainerInfo:
    bins = _bins(b)
    docker_version = _first_version(packages, DOCKER_PACKAGES)
    if docker_version is None:
        docker_version = dockerd_version(b.get("containers", "dockerd_version"))
    containerd = containerd_version(b.get("containers", "containerd_version")) \
        or _first_version(packages, CONTAINERD_PACKAGES)
    filtered = (b.text("containerd-config-filtered") or "").splitlines()
    services = {
        unit: (props.get("ActiveState", ""), props.get("UnitFileState", ""))
        for unit, props in units.items()
        if props.get("LoadState") != "not-found"
    }
    return ContainerInfo(
        docker_installed="dockerd" in bins or any(p in packages for p in DOCKER_PACKAGES),
        docker_version=docker_version,
        daemon_json_text=b.text("file /etc/docker/daemon.json"),
        containerd_version=containerd,
        containerd_nvidia_lines=tuple(line for line in filtered if "nvidia" in line),
        containerd_dropins=tuple(b.all("containers", "containerd_dropin")),
        toolkit_installed=any(t in bins for t in TOOLKIT_BINS) or "nvidia-container-toolkit" in packages,
        cdi_specs=tuple(b.all("containers", "cdi")),
        services=services,
        runtime_config_present=b.get("containers", "nvidia_runtime_config") == "1",
    )


def _storage(b: Blocks) -> StorageInfo:
    mounts = [Mount(*line) for line in parse_mounts(b.text("mounts"))]
    free, size = {}, {}
    for value in b.all("disk", "free"):
        path, avail, total = (value.split("\t") + ["", ""])[:3]
        if avail.isdigit():
            free[path] = int(avail)
        if total.isdigit():
            size[path] = int(total)
    return StorageInfo(
        fstab_text=b.text("file /etc/fstab"), mounts=tuple(mounts), free_bytes=free, size_bytes=size
    )


def _container_virt(b: Blocks) -> str | None:
    virt = _none_if_empty(b.get("host", "virt_container"))
    if virt:
        return virt
    marker = b.get("host", "run_systemd_container").strip()
    if marker:
        return marker
    return "docker" if b.get("host", "dockerenv") == "1" else None


def _script_ms(b: Blocks) -> float | None:
    start, end = _int(b.get("timing", "start_ns")), _int(b.get("timing", "end_ns"))
    if start is None or end is None or end < start:
        return None
    return (end - start) / 1e6
