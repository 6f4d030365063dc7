"""verify_report() JSON shape and junit_xml()."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from gpunode.verify import Finding, GpuInfo, SmiReport, junit_xml, verify_report

GPU = GpuInfo(index=0, name="NVIDIA A10", uuid="GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d",
              pci_bus_id="00000000:06:00.0", driver_version="550.127.05", cuda_version="12.4",
              memory_total_mib=23028)
REPORT = SmiReport("550.127.05", "12.4", 1, [GPU], "xml", 12)
CRITICAL = Finding("gpu-lost", "critical", "GPU fell off", "NVRM: Xid (PCI:0000:06:00): 79", "reboot",
                   "0000:06:00")
WARNING = Finding("persistence-mode-off", "warning", "persistence off", "Disabled",
                  "enable nvidia-persistenced")


def test_verify_report_shape():
    data = json.loads(json.dumps(verify_report("gpu-01", REPORT, [WARNING])))
    assert data["host"] == "gpu-01" and data["healthy"] is True
    assert (data["driver_version"], data["cuda_version"]) == ("550.127.05", "12.4")
    gpu = data["gpus"][0]
    for key in ("index", "name", "uuid", "pci_bus_id", "driver_version", "cuda_version", "memory_total_mib"):
        assert key in gpu
    assert (gpu["name"], gpu["memory_total_mib"]) == ("NVIDIA A10", 23028)
    assert data["findings"] == [WARNING.to_dict()]
    assert verify_report("gpu-02", None, [CRITICAL])["healthy"] is False
    assert verify_report("gpu-02", None, [CRITICAL])["gpus"] == []


def test_junit_one_suite_per_host_and_case_per_finding():
    reports = [verify_report("gpu-01", REPORT, [CRITICAL, WARNING]), verify_report("gpu-02", REPORT, [])]
    xml = junit_xml(reports)
    root = ET.fromstring(xml)
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("3", "1")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["gpu-01", "gpu-02"]
    cases = suites[0].findall("testcase")
    assert [c.get("name") for c in cases] == ["gpu-lost", "persistence-mode-off"]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "GPU fell off"
    assert failure.text is not None and "remedy: reboot" in failure.text
    assert cases[1].find("failure") is None and "[warning]" in cases[1].find("system-out").text
    assert [c.get("name") for c in suites[1].findall("testcase")] == ["healthy"]
    assert suites[1].get("failures") == "0"


def test_finding_rejects_unknown_severity():
    try:
        Finding("x", "fatal", "s", "e", "r")  # type: ignore[arg-type]
    except ValueError as exc:
        assert "severity" in str(exc)
    else:
        raise AssertionError("severity 'fatal' accepted")
