"""What a run produced, per host and per step: the data every report format is made from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

StepStatus = Literal["ok", "changed", "would-change", "skipped", "failed", "cancelled"]  # cancelled: Ctrl-C
HostStatus = Literal["ok", "changed", "would-change", "failed", "unreachable", "cancelled"]


@dataclass
class StepOutcome:
    name: str
    kind: str
    status: StepStatus
    actions: list[dict[str, str]] = field(default_factory=list)   # {"summary", "reason"}
    diffs: list[str] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    where: str = ""
    ignored: bool = False  # failed, but `ignore_errors: true`: the host went on (not a failure of the run)


@dataclass
class HostOutcome:
    host: str
    address: str = ""
    status: HostStatus = "ok"
    steps: list[StepOutcome] = field(default_factory=list)
    error: str = ""
    fix: str = ""
    failed_step: str = ""
    exec_count: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    log_path: str = ""
    phases: dict[str, float] = field(default_factory=dict)   # seconds: connect, lock + facts, probe, steps, release
    commands: list[dict] = field(default_factory=list)       # each remote command: label, seconds, exit_code, session
    rollout: dict = field(default_factory=dict)  # a rolling run: drain, wait, gate, resume or hold, rollback (times)
    phase_times: dict[str, float] = field(default_factory=dict)  # time to ready by phase (report/phases.py)
    timed: list[dict] = field(default_factory=list)  # initramfs generations, DKMS builds: what, after, command, seconds

    @property
    def changed(self) -> int:
        return sum(1 for s in self.steps if s.status in ("changed", "would-change"))

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "unreachable", "cancelled")

    def to_dict(self) -> dict:
        data = asdict(self)
        data["changed"] = self.changed
        return data


@dataclass
class RunResult:
    playbook: str
    check: bool
    hosts: list[HostOutcome]
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return 1 if any(h.failed for h in self.hosts) else 0

    def to_dict(self) -> dict:
        return {
            "playbook": self.playbook, "check": self.check, "seconds": round(self.seconds, 3),
            "exit_code": self.exit_code, "hosts": [h.to_dict() for h in self.hosts],
        }
