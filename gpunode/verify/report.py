"""The verify-gpu result: JSON-ready dict per host, and JUnit XML for CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from gpunode.verify.checks import is_healthy
from gpunode.verify.model import Finding, SmiReport


def verify_report(host: str, smi_report: SmiReport | None, findings: list[Finding]) -> dict[str, object]:
    """{"host", "healthy", "driver_version", "cuda_version", "gpus": [...], "findings": [...]}."""
    healthy = is_healthy(findings)
    return {
        "kind": "verify-gpu",
        "host": host,
        "healthy": healthy,
        "verdict": "healthy" if healthy else "unhealthy",
        "driver_version": smi_report.driver_version if smi_report else None,
        "cuda_version": smi_report.cuda_version if smi_report else None,
        "gpus": [gpu.to_dict() for gpu in smi_report.gpus] if smi_report else [],
        "findings": [finding.to_dict() for finding in findings],
    }


def unreachable_report(host: str, error: str) -> dict[str, object]:
    """The report of a host that could not be checked: verdict "unreachable", healthy null, the cause."""
    return {"kind": "verify-gpu", "host": host, "healthy": None, "verdict": "unreachable", "error": error,
            "driver_version": None, "cuda_version": None, "gpus": [], "findings": []}


SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def junit_xml(reports: list[dict[str, object]]) -> str:
    """One <testsuite> per host, one <testcase> per finding id.

    critical -> <failure>; warning and ok pass, with the details in <system-out>. A host without
    findings gets a single passing "healthy" testcase.
    """
    suites = ET.Element("testsuites", name="gpunode verify-gpu")
    total = failed = 0
    for report in reports:
        host = str(report.get("host", ""))
        findings = list(report.get("findings") or [])  # type: ignore[call-overload]
        suite = ET.SubElement(suites, "testsuite", name=host)
        cases = 0
        failures = 0
        for finding in findings or [{"id": "healthy", "severity": "ok", "summary": "no findings",
                                     "evidence": "", "remedy": "", "gpu": None}]:
            cases += 1
            case = ET.SubElement(suite, "testcase", classname=f"gpunode.verify.{host}", name=finding["id"])
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
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _details(finding: dict[str, object]) -> str:
    gpu = f"GPU: {finding['gpu']}\n" if finding.get("gpu") else ""
    return f"{finding['summary']}\n{gpu}evidence: {finding['evidence']}\nremedy: {finding['remedy']}"
