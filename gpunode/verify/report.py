"""The verify-gpu result: JSON-ready dict per host, and JUnit XML for CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.parsers.model import Finding, SmiReport
from gpunode.verify.checks.analyze import is_healthy


@dataclass
class HostReport:
    """verify-gpu's result for one host: its findings and nvidia-smi report, or why it could not be checked."""

    host: str
    findings: list[Finding] = field(default_factory=list)
    smi: SmiReport | None = None
    error: str | None = None  # set when the host could not be checked (unreachable, unreadable facts)
    exec_count: int | None = None

    @property
    def healthy(self) -> bool | None:
        """None when the host could not be checked; else False on any critical finding."""
        return None if self.error is not None else is_healthy(self.findings)

    @property
    def verdict(self) -> str:
        return {True: "healthy", False: "unhealthy", None: "unreachable"}[self.healthy]

    def to_dict(self) -> dict[str, object]:
        """The JSON report (gpunode/verify/report.schema.json)."""
        data: dict[str, object] = {
            "kind": "verify-gpu",
            "host": self.host,
            "healthy": self.healthy,
            "verdict": self.verdict,
            "driver_version": self.smi.driver_version if self.smi else None,
            "cuda_version": self.smi.cuda_version if self.smi else None,
            "gpus": [gpu.to_dict() for gpu in self.smi.gpus] if self.smi else [],
            "findings": [finding.to_dict() for finding in self.findings],
        }
        if self.error is not None:
            data["error"] = self.error
        if self.exec_count is not None:
            data["exec_count"] = self.exec_count
        return data


def verify_report(host: str, smi_report: SmiReport | None, findings: list[Finding]) -> dict[str, object]:
    """The JSON report of a checked host (HostReport.to_dict)."""
    return HostReport(host, findings, smi_report).to_dict()


def unreachable_report(host: str, error: str) -> dict[str, object]:
    """The JSON report of a host that could not be checked: verdict "unreachable", healthy null, the cause."""
    return HostReport(host, error=error).to_dict()


SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def junit_xml(reports: list[dict[str, object]], command: str = "verify-gpu") -> str:
    """One <testsuite> per host, one <testcase> per finding id; `command` names the suites (gpunode.COMMAND).

    critical -> <failure>; warning and ok pass, with the details in <system-out>. A host without
    findings gets a single passing "healthy" testcase; a host that could not be checked (unreachable) gets one
    "connect" testcase with an <error> holding the cause, so no host is missing from the report. A host whose
    verdict is "incomplete" (an acceptance tier cut short: exit 1) gets a failing "verdict" testcase, so the XML
    never reads green where the exit code says not.
    """
    suites = ET.Element("testsuites", name=f"gpunode {command}")
    classes = "gpunode." + command.split("-")[0]
    total = failed = errors = 0
    for report in reports:
        host = str(report.get("host", ""))
        findings = list(report.get("findings") or [])  # type: ignore[call-overload]
        suite = ET.SubElement(suites, "testsuite", name=host)
        if report.get("error") is not None:
            case = ET.SubElement(suite, "testcase", classname=f"{classes}.{host}", name="connect")
            ET.SubElement(case, "error", message=str(report["error"])[:500], type="unreachable").text = str(
                report["error"])
            suite.set("tests", "1")
            suite.set("failures", "0")
            suite.set("errors", "1")
            total += 1
            errors += 1
            continue
        cases = failures = 0
        if report.get("verdict") == "incomplete":
            cases, failures = 1, 1
            case = ET.SubElement(suite, "testcase", classname=f"{classes}.{host}", name="verdict")
            ET.SubElement(case, "failure", message="incomplete: the checks did not all run to a verdict",
                          type="incomplete").text = "; ".join(str(f["summary"]) for f in findings) or "incomplete"
        for finding in findings or [{"id": "healthy", "severity": "ok", "summary": "no findings",
                                     "evidence": "", "remedy": "", "gpu": None}]:
            cases += 1
            case = ET.SubElement(suite, "testcase", classname=f"{classes}.{host}", name=finding["id"])
            details = _details(finding)
            if finding["severity"] == "critical":
                failures += 1
                failure = ET.SubElement(case, "failure", message=finding["summary"], type="critical")
                failure.text = details
            else:
                ET.SubElement(case, "system-out").text = f"[{finding['severity']}] {details}"
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        total += cases
        failed += failures
    suites.set("tests", str(total))
    suites.set("failures", str(failed))
    suites.set("errors", str(errors))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _details(finding: dict[str, object]) -> str:
    gpu = f"GPU: {finding['gpu']}\n" if finding.get("gpu") else ""
    return f"{finding['summary']}\n{gpu}evidence: {finding['evidence']}\nremedy: {finding['remedy']}"
