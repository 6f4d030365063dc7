"""Human table rows for a `Facts` value."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpunode.facts.model import Facts, PciGpu


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h {minutes}m" if days else f"{hours}h {minutes}m"


def _link(g: PciGpu) -> str:
    gen = f"Gen{g.link_gen_current}" if g.link_gen_current else "Gen?"
    width = f"x{g.link_width_current}" if g.link_width_current else "x?"
    return f"{gen} {width}" + (" (degraded)" if g.link_degraded else "")


def _devices(devices: list[PciGpu]) -> str:
    groups = Counter((g.device_id, g.driver or "no driver", _link(g)) for g in devices)
    return "; ".join(f"{n} x {dev} [{drv}] {link}" for (dev, drv, link), n in groups.items())


def _secure_boot(f: Facts) -> str:
    if not f.efi:
        return "n/a (legacy BIOS boot)"
    return {True: "enabled", False: "disabled", None: "unknown (EFI)"}[f.secure_boot]


def _driver(f: Facts) -> str:
    n = f.nvidia
    if not n.driver_version:
        return "not loaded"
    kind = " (open)" if n.open_kernel_module else ""
    return f"{n.driver_version}{kind}; modules: {', '.join(n.modules_loaded) or 'none'}"


def _nouveau(f: Facts) -> str:
    state = "LOADED" if f.nvidia.nouveau_loaded else "not loaded"
    return state + (", blacklisted" if f.nvidia.nouveau_blacklisted else "")


def _locks(f: Facts) -> str:
    if not f.pkg.lock_holders:
        return "free"
    return "; ".join(f"{h.path} held by {h.pid} {h.comm or h.command}" for h in f.pkg.lock_holders)


def _system_rows(f: Facts) -> list[tuple[str, str]]:
    """Who and what the host is: name, OS, kernel, cloud."""
    headers = "present" if f.kernel.running_headers_present else "MISSING"
    uid = f.uid if f.uid is not None else "?"
    return [
        ("Host", f"{f.hostname} (user {f.user or '?'}, uid {uid})"),
        ("OS", f"{f.os.pretty_name or f.os.id or 'unknown'} [{f.os.family}, {f.os.package_manager or '-'}]"),
        ("Arch", f.os.arch or "?"),
        ("Kernel", f"{f.kernel.running} (headers {headers})"),
        ("Installed kernels", ", ".join(f.kernel.installed) or "-"),
        ("Cloud", f.cloud_vendor or "unknown"),
    ]


def _gpu_stack_rows(f: Facts) -> list[tuple[str, str]]:
    """GPUs, NVSwitches and the driver stack around them."""
    gpus = [g for g in f.gpus if not g.is_nvswitch]
    switches = [g for g in f.gpus if g.is_nvswitch]
    n = f.nvidia
    dkms = "; ".join(f"{d.module}/{d.version} {d.kernel or ''}: {d.status}" for d in n.dkms)
    return [
        ("GPUs", _devices(gpus) if gpus else "none"),
        ("NVSwitch", _devices(switches) if switches else "none"),
        ("NVIDIA driver", _driver(f)),
        ("nouveau", _nouveau(f)),
        ("DKMS", dkms or "-"),
        ("Fabric manager", {True: "active", False: "inactive", None: "unknown"}[n.fabricmanager_active]),
        ("Secure Boot", _secure_boot(f)),
    ]


def _container_rows(f: Facts) -> list[tuple[str, str]]:
    """Container runtimes, the toolkit and their services."""
    c = f.containers
    services = ", ".join(f"{u.removesuffix('.service')}={a}/{e or '-'}" for u, (a, e) in c.services.items())
    return [
        ("Docker", (c.docker_version or "installed") if c.docker_installed else "not installed"),
        ("containerd", c.containerd_version or "not installed"),
        ("NVIDIA container toolkit", "installed" if c.toolkit_installed else "not installed"),
        ("Services", services or "-"),
    ]


def _host_state_rows(f: Facts) -> list[tuple[str, str]]:
    """What may block or follow a run: locks, cloud-init, reboots, mounts, space, uptime."""
    network = [f"{m.source} on {m.target} ({m.fstype})" for m in f.storage.mounts if m.is_network]
    free = ", ".join(f"{p} {_bytes(v)}" for p, v in f.storage.free_bytes.items())
    return [
        ("Package locks", _locks(f)),
        ("cloud-init", "RUNNING" if f.pkg.cloud_init_running else "not running"),
        ("Reboot required", "yes" if f.pkg.reboot_required else "no"),
        ("Network mounts", "; ".join(network) or "none"),
        ("Free space", free or "-"),
        ("Container", f.container_virt or "no"),
        ("Uptime", _duration(f.uptime_seconds) if f.uptime_seconds is not None else "?"),
        ("Boot marker", f.boot_marker or "-"),
    ]


def summary_rows(f: Facts) -> list[tuple[str, str]]:
    """(label, value) rows, most important first."""
    rows = _system_rows(f) + _gpu_stack_rows(f) + _container_rows(f) + _host_state_rows(f)
    if f.script_ms is not None:
        rows.append(("Facts script", f"{f.script_ms:.0f} ms" + ("" if f.complete else " (TRUNCATED)")))
    return rows
