"""One exit-code rule for every command that runs on hosts (issue 37): an unreachable host makes the run exit 1,
never 0 or 2, and the JUnit report lists it as an <error> test case (docs/guide.md "Exit codes"). The host is
127.0.0.1 on a port that refuses at once, so nothing here waits for a timeout."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import run_cli

COMMANDS = {
    "provision": ["provision", "--playbook", "base"],
    "mount-nfs": ["mount-nfs", "n1", "--server", "nas.example.com", "--export", "/", "--path", "/mnt/nas"],
    "verify-gpu": ["verify-gpu", "n1"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unreachable_host_is_exit_1_and_a_junit_error(tmp_path, command):
    inventory = tmp_path / "inv.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"n1": {"ansible_host": "127.0.0.1", "ansible_port": 1}}}}))
    junit = tmp_path / "r.xml"
    result = run_cli(*COMMANDS[command], "-i", str(inventory), "--junit", str(junit))
    assert result.code == 1, result.output
    assert "Traceback" not in result.output
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert "n1" in (case.get("name", "") + case.get("classname", "")), ET.tostring(case)
    assert case.find("error") is not None, ET.tostring(case)
