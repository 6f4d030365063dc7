"""Per-GPU health checks on an nvidia-smi report (one finding per check id, listing the GPUs)."""

from __future__ import annotations

from collections.abc import Callable

from gpunode.parsers.model import Finding, GpuInfo, Severity, SmiReport

_HW_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def gpu_checks(report: SmiReport | None) -> list[Finding]:
    """All per-GPU checks for one report."""
    if report is None:
        return []
    findings: list[Finding] = []
    if report.warnings:
        findings.append(Finding(
            "smi-output-incomplete", "warning",
            f"nvidia-smi {report.source_kind} output is incomplete; the GPU checks saw only part of it",
            "; ".join(report.warnings),
            "Capture the full output again (nvidia-smi -q -x is the most complete) and re-run the analysis.",
        ))
    findings.extend(_header_errors(report))
    for check in _CHECKS:
        finding = check(report.gpus)
        if finding is not None:
            findings.append(finding)
    return findings


def _header_errors(report: SmiReport) -> list[Finding]:
    """CUDA Version: ERR! (libcuda could not report its version) and other header values NVML failed to read."""
    cuda = [f for f in report.error_fields if f.lower().startswith("cuda")]
    other = [f for f in report.error_fields if f not in cuda]
    findings = []
    if cuda:
        findings.append(Finding(
            "cuda-version-error", "critical", "nvidia-smi could not read the CUDA driver version (CUDA Version: ERR!)",
            f"nvidia-smi ({report.source_kind}) header: {'; '.join(cuda)}",
            "libcuda (the CUDA driver library) failed to initialise, so CUDA programs will fail too: check the "
            "user-space driver matches the kernel module (`cat /proc/driver/nvidia/version` vs the installed "
            "libnvidia-compute/libcuda1 package), that only one libcuda.so.1 is on the loader path "
            "(`ldconfig -p | grep libcuda`; under WSL only /usr/lib/wsl/lib, with no Linux driver installed), "
            "regenerate a stale CDI spec (`nvidia-ctk cdi generate`), then reboot (WSL: `wsl --shutdown`)."))
    if other:
        findings.append(Finding(
            "nvml-unknown-error", "warning", "nvidia-smi could not read some header values",
            f"nvidia-smi ({report.source_kind}) header: {'; '.join(other)}",
            "Unknown Error / ERR! values often precede a GPU failure: check `dmesg` for Xid errors, and drain and "
            "reset the GPU if any appear."))
    return findings


def _collect(gpus: list[GpuInfo], test: Callable[[GpuInfo], str | None]) -> tuple[list[GpuInfo], list[str]]:
    hits: list[GpuInfo] = []
    notes: list[str] = []
    for gpu in gpus:
        note = test(gpu)
        if note:
            hits.append(gpu)
            notes.append(f"{gpu.label}: {note}")
    return hits, notes


def _finding(check_id: str, severity: Severity, summary: str, notes: list[str], remedy: str,
             hits: list[GpuInfo]) -> Finding:
    return Finding(check_id, severity, summary, "; ".join(notes), remedy, ", ".join(g.ident for g in hits))


def _persistence(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "persistence mode Disabled" if g.persistence_mode is False
                           else None)
    if not hits:
        return None
    return _finding(
        "persistence-mode-off", "warning", f"persistence mode is off on {len(hits)} GPU(s)", notes,
        "Enable the persistence daemon so the driver stays initialised between jobs: `systemctl enable --now "
        "nvidia-persistenced` (preferred over the legacy `nvidia-smi -pm 1`, which does not survive a "
        "reboot).",
        hits)


def _ecc(gpus: list[GpuInfo]) -> Finding | None:
    def test(g: GpuInfo) -> str | None:
        if g.ecc_uncorrectable_volatile:
            return (f"{g.ecc_uncorrectable_volatile} uncorrectable ECC error(s) since the last driver load "
                    f"(aggregate {g.ecc_uncorrectable_aggregate})")
        if g.ecc_uncorrectable_aggregate:
            return (f"aggregate (lifetime) uncorrectable ECC count {g.ecc_uncorrectable_aggregate}, "
                    f"volatile {g.ecc_uncorrectable_volatile}")
        return None

    hits, notes = _collect(gpus, test)
    if not hits:
        return None
    current = any(g.ecc_uncorrectable_volatile for g in hits)
    return _finding(
        "ecc-uncorrectable", "critical" if current else "warning",
        f"uncorrectable ECC errors on {len(hits)} "
        "GPU(s)" + ("" if current else " (lifetime count only)"), notes,
        "Drain the node and reset the GPU (`nvidia-smi -r -i <id>`) or reboot, then check `nvidia-smi -q -d "
        "ECC,ROW_REMAPPER,PAGE_RETIREMENT`: remapping/retirement must succeed. A lifetime count alone is "
        "history if rows were remapped; recurring errors or a remap failure mean RMA.", hits)


def _remap_pending(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "Remapped Rows: Pending Yes" if g.remapped_rows_pending else None)
    if not hits:
        return None
    return _finding(
        "row-remap-pending", "warning", f"row remapping pending on {len(hits)} GPU(s)", notes,
        "A memory row is marked for remapping; it takes effect at the next GPU reset. Drain the GPU and "
        "reset it "
        "(`nvidia-smi -r -i <id>`) or reboot the node when convenient.", hits)


def _remap_failure(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(
        gpus, lambda g: "Remapped Rows: Remapping Failure Occurred Yes" if g.remapped_rows_failure else None)
    if not hits:
        return None
    return _finding(
        "row-remap-failure", "critical", f"row remapping failed on {len(hits)} GPU(s)", notes,
        "The GPU ran out of spare rows or could not record a remap: take it out of service, run NVIDIA field "
        "diagnostics and open an RMA with the vendor.", hits)


def _retired_pending(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "Retired Pages: pending retirement Yes" if g.retired_pages_pending
                           else None)
    if not hits:
        return None
    return _finding(
        "retired-pages-pending", "warning", f"page retirement pending on {len(hits)} GPU(s)", notes,
        "Retired pages take effect when the driver reloads: drain the node and reset the GPU or reboot. "
        "Check "
        "`nvidia-smi -q -d PAGE_RETIREMENT`; many retired pages (NVIDIA's RMA threshold) mean replacement.",
        hits)


def _busy(g: GpuInfo) -> bool:
    return g.performance_state == "P0" and (g.utilization_gpu_pct or 0) > 0


def _below(current: int | None, maximum: int | None) -> bool:
    return current is not None and maximum is not None and 0 < current < maximum


def _pcie(gpus: list[GpuInfo]) -> Finding | None:
    def test(g: GpuInfo) -> str | None:
        width_low = _below(g.pcie_width_current, g.pcie_width_max)
        gen_low = _below(g.pcie_gen_current, g.pcie_gen_max)
        state = f"performance state {g.performance_state}, GPU utilization {g.utilization_gpu_pct}%"
        parts = []
        if width_low:
            parts.append(f"link width x{g.pcie_width_current} of max x{g.pcie_width_max}")
        if gen_low and _busy(g):
            parts.append(f"link gen {g.pcie_gen_current} of max {g.pcie_gen_max} while busy")
        elif gen_low and width_low:
            parts.append(f"gen {g.pcie_gen_current} of {g.pcie_gen_max} is normal idle power saving")
        return f"{', '.join(parts)} ({state})" if parts else None

    hits, notes = _collect(gpus, test)
    if not hits:
        return None
    return _finding(
        "pcie-degraded", "warning", f"PCIe link below its maximum on {len(hits)} GPU(s)", notes,
        "A narrower link than the GPU supports usually means a badly seated card, riser or cable, or a slot "
        "wired narrower (some cloud instances expose x8 by design: compare with a known-good node). Check "
        "`lspci -vv` LnkSta vs LnkCap and dmesg for AER errors; reseat or move the card. Idle GPUs lower "
        "the link "
        "generation to save power, so only a generation drop under load is reported.", hits)


def _throttle(gpus: list[GpuInfo]) -> Finding | None:
    def test(g: GpuInfo) -> str | None:
        active = [reason for reason in _HW_THROTTLE if reason in g.throttle_reasons_active]
        return f"clock event reasons active: {', '.join(active)}" if active else None

    hits, notes = _collect(gpus, test)
    if not hits:
        return None
    return _finding(
        "throttle-hw", "warning", f"hardware/thermal clock slowdown active on {len(hits)} GPU(s)", notes,
        "Thermal slowdown: check airflow, fans, inlet temperature and `nvidia-smi -q -d TEMPERATURE`. Power "
        "brake "
        "slowdown is asserted by the system (lost PSU redundancy, BMC power capping): check PSUs and the BMC "
        "event log. HW slowdown alone can be either: see `nvidia-smi -q -d PERFORMANCE,POWER`.", hits)


def _lost(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "nvidia-smi shows 'GPU requires reset' / 'GPU is lost' for "
                           + ", ".join(g.lost_fields) if g.lost_fields else None)
    if not hits:
        return None
    return _finding(
        "gpu-reset-required", "critical", f"{len(hits)} GPU(s) must be reset before they can be used", notes,
        "Drain the GPU, reset it (`nvidia-smi -r -i <gpu>`, persistence mode off first) or reboot the node; "
        "look for the Xid that preceded it in `dmesg` (79, 119, 48/94/95) and RMA the GPU if it recurs.", hits)


def _unknown_fields(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "NVML returned Unknown Error/ERR! for " + ", ".join(
        g.unknown_error_fields) if g.unknown_error_fields else None)
    if not hits:
        return None
    return _finding(
        "nvml-unknown-error", "warning", f"nvidia-smi could not read some fields on {len(hits)} GPU(s)",
        notes,
        "Unknown Error / ERR! values often precede a GPU failure: check `dmesg` for Xid errors, and drain "
        "and "
        "reset the GPU if any appear.", hits)


def _inforom(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: "infoROM is corrupted (checksum invalid)" if g.inforom_ok is False
                           else None)
    if not hits:
        return None
    return _finding(
        "inforom-corrupted", "warning", f"infoROM corrupted on {len(hits)} GPU(s)", notes,
        "The GPU still works, but ECC page retirement / row-remap records cannot be trusted or stored. Open "
        "a "
        "case with the vendor to reflash the InfoROM or RMA the board.", hits)


def _mig(gpus: list[GpuInfo]) -> Finding | None:
    def test(g: GpuInfo) -> str | None:
        if None in (g.mig_mode_current, g.mig_mode_pending) or g.mig_mode_current == g.mig_mode_pending:
            return None
        return f"MIG mode current {_on(g.mig_mode_current)}, pending {_on(g.mig_mode_pending)}"

    hits, notes = _collect(gpus, test)
    if not hits:
        return None
    return _finding(
        "mig-pending-reset", "warning", f"MIG mode change waits for a GPU reset on {len(hits)} GPU(s)", notes,
        "Stop GPU workloads (and nvidia-persistenced/dcgm if they hold the GPU), then reset the GPU "
        "(`nvidia-smi -r -i <id>`) or reboot so the pending MIG mode applies.", hits)


def _uuid_missing(gpus: list[GpuInfo]) -> Finding | None:
    hits, notes = _collect(gpus, lambda g: f"GPU {g.index}: UUID: GPU- (empty)" if g.uuid_missing else None)
    if not hits:
        return None
    return _finding(
        "gpu-uuid-unreadable", "critical", f"the driver cannot read the UUID of {len(hits)} GPU(s)", notes,
        "An empty UUID means the driver does not fully support or cannot read this board (its infoROM): container "
        "runtimes and schedulers that address GPUs by UUID cannot use it. Install a driver branch that supports "
        "this GPU (see NVIDIA's legacy driver list), then check `nvidia-smi -q` for an infoROM warning.", hits)


def _on(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


_CHECKS: tuple[Callable[[list[GpuInfo]], Finding | None], ...] = (
    _ecc, _remap_failure, _remap_pending, _retired_pending, _lost, _unknown_fields, _throttle, _pcie, _persistence,
    _inforom, _mig, _uuid_missing,
)
