"""Data model of the GPU analysis: findings, per-GPU facts, one nvidia-smi report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Severity = Literal["ok", "warning", "critical"]
SourceKind = Literal["xml", "text", "table", "csv", "list"]
SEVERITIES: tuple[str, ...] = ("ok", "warning", "critical")


@dataclass
class Finding:
    """One conclusion: what is wrong (or fine), the quoted evidence, and what to do."""

    id: str
    severity: Severity
    summary: str
    evidence: str
    remedy: str
    gpu: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_dict(self) -> dict[str, str | None]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass
class GpuInfo:
    """Facts about one GPU as nvidia-smi reported them; None when "N/A" or absent."""

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    persistence_mode: bool | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    ecc_mode: bool | None = None
    ecc_uncorrectable_volatile: int | None = None
    ecc_uncorrectable_aggregate: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    remapped_rows_uncorrectable: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    throttle_reasons_active: list[str] = field(default_factory=list)
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    mig_devices: int = 0
    inforom_ok: bool | None = None
    unknown_error_fields: list[str] = field(default_factory=list)
    lost_fields: list[str] = field(default_factory=list)  # fields reading "GPU requires reset" / "GPU is lost"
    performance_state: str | None = None
    utilization_gpu_pct: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    pci_device_id: str | None = None
    uuid_missing: bool = False  # `nvidia-smi -L` printed an empty UUID ("GPU-"): the driver cannot read it
    samples: int = 1  # how many outputs (sections, files, rows of a time series) described this GPU

    @property
    def label(self) -> str:
        """Short human name: "GPU 0 00000000:01:00.0 (NVIDIA A100-SXM4-80GB)"."""
        parts = [f"GPU {self.index}" if self.index is not None else "GPU"]
        if self.pci_bus_id:
            parts.append(self.pci_bus_id)
        if self.name:
            parts.append(f"({self.name})")
        return " ".join(parts)

    @property
    def ident(self) -> str:
        """Identifier used in Finding.gpu: the bus id, else uuid, else index."""
        return self.pci_bus_id or self.uuid or f"GPU {self.index}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass
class SmiReport:
    """One parsed nvidia-smi output (XML, -q text, table, --query-gpu CSV or -L list)."""

    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: list[GpuInfo]
    source_kind: SourceKind
    schema_version: int | None = None
    timestamp: str | None = None
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what a partial capture lacks (GPU sections, table rows)
    error_fields: list[str] = field(default_factory=list)  # header values that read ERR! / Unknown Error

    @property
    def gpu_count(self) -> int:
        """GPUs the driver reports: attached_gpus when printed, else the GPUs listed."""
        return self.attached_gpus if self.attached_gpus is not None else len(self.gpus)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return {
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "attached_gpus": self.attached_gpus,
            "source_kind": self.source_kind,
            "schema_version": self.schema_version,
            "timestamp": self.timestamp,
            "warnings": list(self.warnings),
            "missing": list(self.missing),
            "error_fields": list(self.error_fields),
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }
