"""The build spec: what `image-provision` (called by Packer's shell-local provisioner) does to the build instance.

The toolkit writes it to `<build_dir>/build.json` before Packer starts, so the templates stay small and no
playbook variable has to survive shell quoting inside a Packer template.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpunode.errors import UsageError

VerifyMode = Literal["auto", "always", "never"]


@dataclass
class BuildSpec:
    """Paths are absolute; `key_file` empty: the key Packer made, saved by the template as <build_dir>/packer_key."""

    playbook: str
    build_dir: str
    variables: dict[str, Any] = field(default_factory=dict)
    key_file: str = ""
    finalize_playbook: str = ""
    verify: VerifyMode = "auto"          # auto: verify-gpu when the build instance has NVIDIA GPUs
    expect_gpus: int | None = None
    min_free_gb: float = 2.0
    require_driver: bool = False
    cleanup: list[str] | None = None     # image_cleanup categories; None: all
    power_off: bool = False              # qemu: gpunode powers the VM off at the end (the template cannot)
    ecs_agent: bool = False              # AWS Batch: the image must run the ECS agent (image_validate checks it)

    @property
    def report_path(self) -> Path:
        return Path(self.build_dir) / "report.json"

    @property
    def known_hosts(self) -> Path:
        return Path(self.build_dir) / "known_hosts"

    @property
    def log_dir(self) -> Path:
        return Path(self.build_dir) / "logs"

    def write(self) -> Path:
        path = Path(self.build_dir) / "build.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def read(cls, path: str | Path) -> BuildSpec:
        try:
            data = json.loads(Path(path).read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError) as exc:
            raise UsageError(f"cannot read the build spec {path}: {exc}",
                             fix="image-provision is run by Packer for `gpunode build-ami`/`build-image`") from None
