"""The build report `image-provision` writes (`<build_dir>/report.json`) and the toolkit reads after Packer."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpunode.errors import GpunodeError


@dataclass
class BuildReport:
    """ok, or the phase and step that failed on the build instance, with the cause and the fix."""

    host: str = ""
    playbook: str = ""
    playbook_sha256: str = ""
    ok: bool = False
    phase: str = "provision"
    failed_step: str = ""
    error: str = ""
    fix: str = ""
    log: str = ""
    image: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)   # {"ran", "healthy", "summary", "findings"}
    runs: dict[str, Any] = field(default_factory=dict)     # phase -> RunResult.to_dict()
    seconds: float = 0.0

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> BuildReport | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def failure(self) -> GpunodeError:
        """The error to show when the build failed on the instance: which step, why, what to do."""
        step = self.failed_step or self.phase
        where = f" ({self.log})" if self.log else ""
        return GpunodeError(
            f"the image build failed at step '{step}' ({self.phase}) on the build instance {self.host}: {self.error}",
            fix=(self.fix or "read the step's output above").rstrip(". ") + f"; the host log{where} has every command "
            "and its output"
            + ". Packer removed the build instance: no image was made",
            step=step,
        )
