"""JUnit XML for CI pipelines: one testsuite per host, one testcase per step.

Every text goes through `visible` (control bytes such as ANSI colours are not allowed in XML 1.0), and each
suite's counts are counted from the elements written, so they always match.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpunode.report.model import HostOutcome, RunResult, StepOutcome
from gpunode.report.text import visible


def junit_xml(result: RunResult) -> str:
    """The run as JUnit XML: a testsuite per host with a testcase per step (and one for a host-level error)."""
    suites = ET.Element("testsuites", name=visible(f"gpunode {result.playbook}"))
    for host in result.hosts:
        suite = ET.SubElement(suites, "testsuite", name=visible(host.host), time=f"{host.seconds:.3f}")
        for step in host.steps:
            _step_case(suite, host, step)
        if host.status in ("unreachable", "cancelled") or (host.error and not host.steps):
            _host_error_case(suite, host)
        _count(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _step_case(suite: ET.Element, host: HostOutcome, step: StepOutcome) -> None:
    """A step's testcase: failed (with the host's fix on the failing step), skipped, cancelled, or what it did."""
    case = ET.SubElement(suite, "testcase", classname=visible(host.host), name=visible(step.name),
                         time=f"{step.seconds:.3f}")
    if step.status == "failed" and step.ignored:  # as Ansible's junit callback: not a failure
        ET.SubElement(case, "system-out").text = visible(f"failed (ignored): {step.message}")
    elif step.status == "failed":
        fix = host.fix if step.name == host.failed_step else ""
        ET.SubElement(case, "failure", message=visible(step.message[:500])).text = visible(
            step.message + (f"\nfix: {fix}" if fix else ""))
    elif step.status == "skipped":
        ET.SubElement(case, "skipped", message=visible(step.message))
    elif step.status == "cancelled":
        ET.SubElement(case, "skipped", message=visible(f"cancelled (Ctrl-C): {step.message}"))
    elif step.actions:
        ET.SubElement(case, "system-out").text = visible("\n".join(a["summary"] for a in step.actions))


def _host_error_case(suite: ET.Element, host: HostOutcome) -> None:
    """A testcase for an error outside any step: unreachable, cancelled, or failed before its first step."""
    case = ET.SubElement(suite, "testcase", classname=visible(host.host),
                         name="connect" if host.status == "unreachable" or not host.steps else host.status)
    ET.SubElement(case, "error", message=visible(host.error[:500])).text = visible(f"{host.error}\nfix: {host.fix}")


def _count(suite: ET.Element) -> None:
    """The suite's tests, failures, errors and skipped counts, counted from the testcases written."""
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attr, str(sum(1 for c in cases if c.find(kind) is not None)))
