"""`gpunode accept`'s result for one host: the node's document, the findings made of it, the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.parsers.model import Finding
from gpunode.verify.checks.analyze import is_healthy

_CHECK_KEYS = ("name", "status", "seconds", "estimate_s", "timeout_s", "reason", "tool", "command", "measurements")


@dataclass
class AcceptReport:
    """One host: its node document (None when it could not be run) and findings, or why it could not be checked."""

    host: str
    doc: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None

    @property
    def complete(self) -> bool:
        """Whether every check of the tier ran (none stopped by the budget, none that could not judge)."""
        return self.doc is not None and self.doc.get("verdict") != "unknown"

    @property
    def healthy(self) -> bool | None:
        """False on a critical finding; None when unreachable or when the tier did not run to a verdict."""
        if self.error is not None or self.doc is None:
            return None
        if not is_healthy(self.findings):
            return False
        return True if self.complete else None

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "unreachable"
        return {True: "healthy", False: "unhealthy", None: "incomplete"}[self.healthy]

    def to_dict(self, raw: bool = True) -> dict[str, object]:
        """The JSON report; `raw` keeps the node's whole document (tools' raw outputs included)."""
        data: dict[str, object] = {"kind": "accept", "host": self.host, "healthy": self.healthy,
                                   "verdict": self.verdict, "findings": [f.to_dict() for f in self.findings]}
        if self.error is not None:
            data["error"] = self.error
            return data
        doc = self.doc or {}
        data.update(tier=doc.get("tier"), budget_s=doc.get("budget_s"), elapsed_s=doc.get("elapsed_s"),
                    node_verdict=doc.get("verdict"), gpus=doc.get("gpus") or [],
                    checks=[{k: c[k] for k in _CHECK_KEYS if k in c} for c in doc.get("checks") or []],
                    not_run=doc.get("not_run") or [], stopped_by_budget=doc.get("stopped_by_budget"))
        if raw:
            data["node"] = doc
        return data
