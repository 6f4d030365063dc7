"""JUnit XML for CI pipelines: one testsuite per host, one testcase per step."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpunode.report.model import RunResult


def junit_xml(result: RunResult) -> str:
    suites = ET.Element("testsuites", name=f"gpunode {result.playbook}")
    for host in result.hosts:
        suite = ET.SubElement(suites, "testsuite", name=host.host, tests=str(max(1, len(host.steps))),
                              failures=str(sum(1 for s in host.steps if s.status == "failed")),
                              errors="1" if host.status in ("unreachable", "cancelled") else "0",
                              skipped=str(sum(1 for s in host.steps if s.status == "skipped")),
                              time=f"{host.seconds:.3f}")
        for step in host.steps:
            case = ET.SubElement(suite, "testcase", classname=host.host, name=step.name, time=f"{step.seconds:.3f}")
            if step.status == "failed":
                ET.SubElement(case, "failure", message=step.message[:500]).text = f"{step.message}\nfix: {host.fix}"
            elif step.status == "skipped":
                ET.SubElement(case, "skipped", message=step.message)
            elif step.actions:
                ET.SubElement(case, "system-out").text = "\n".join(a["summary"] for a in step.actions)
        if host.status in ("unreachable", "cancelled") or (host.error and not host.steps):
            case = ET.SubElement(suite, "testcase", classname=host.host, name="connect")
            ET.SubElement(case, "error", message=host.error[:500]).text = f"{host.error}\nfix: {host.fix}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
