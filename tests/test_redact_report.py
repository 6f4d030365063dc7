"""Secrets never reach logs; reports have the documented shapes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpunode.connection import Redactor, Transcript
from gpunode.report.junit import junit_xml
from gpunode.report.model import HostOutcome, RunResult, StepOutcome


def test_transcript_masks_secrets(tmp_path):
    redactor = Redactor(["hunter22"])
    redactor.add_from_vars({"aws_secret_access_key": "AKIASECRET123", "driver_branch": "535"})
    log = tmp_path / "h.log"
    transcript = Transcript("h", redactor, log)
    transcript.record("echo hunter22", 0, 0.1, "AKIASECRET123 ok", "")
    transcript.close()
    text = log.read_text()
    assert "hunter22" not in text and "AKIASECRET123" not in text
    assert text.count("********") == 2
    assert transcript.exec_count == 1


def test_exit_code_and_junit():
    ok = HostOutcome("a", status="ok", steps=[StepOutcome("s", "packages", "ok")])
    bad = HostOutcome("b", status="failed", error="boom", fix="do x",
                      steps=[StepOutcome("s", "packages", "failed", message="boom")])
    gone = HostOutcome("c", status="unreachable", error="cannot reach")
    assert RunResult("p.yml", False, [ok]).exit_code == 0
    result = RunResult("p.yml", False, [ok, bad, gone])
    assert result.exit_code == 1
    root = ET.fromstring(junit_xml(result).split("\n", 1)[1])
    suites = {s.get("name"): s for s in root}
    assert suites["b"].get("failures") == "1"
    assert suites["c"].find("testcase/error").get("message") == "cannot reach"
    assert result.to_dict()["hosts"][1]["error"] == "boom"
