"""verify-gpu on real lab hosts (no GPU here: it must say so), diagnose and collect from the command line."""

from __future__ import annotations

import json
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from gpunode.verify.report import SCHEMA_PATH
from tests.conftest import REPO, host_inventory, run_cli

FIXTURES = REPO / "tests" / "data" / "nvidia"
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def needs_fixtures(test):
    """The corpus is in the repository (tests/data): a missing capture fails the test, it never skips."""
    return test


@pytest.mark.lab
def test_verify_gpu_on_a_host_without_gpu_is_honest(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    result = run_cli("verify-gpu", "-i", str(inventory), host.name, "--json", "--junit", str(tmp_path / "v.xml"))
    assert result.code == 1, result.output
    assert "Traceback" not in result.output
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["healthy"] is False and report["verdict"] == "unhealthy" and report["gpus"] == []
    ids = [f["id"] for f in report["findings"]]
    assert ids[0] == "no-nvidia-gpu"
    assert "dkms-not-built" not in ids  # no driver installed: nothing to build yet
    assert report["exec_count"] == 1  # facts and evidence in one round trip; no docker, no container test
    assert "no-nvidia-gpu" in (tmp_path / "v.xml").read_text()
    human = run_cli("verify-gpu", "-i", str(inventory), host.name)
    assert "NOT healthy" in human.stdout and "no NVIDIA GPU on the PCI bus" in human.stdout


@pytest.mark.lab
def test_verify_gpu_unreachable_exits_1(lab):
    result = run_cli("verify-gpu", f"gpunode@{lab.network.address(201)}", "--json")
    assert result.code == 1  # a host that could not be checked is a failed host (docs/guide.md, Exit codes)
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert "no route to" in report["error"] and report["healthy"] is None and report["verdict"] == "unreachable"
    human = run_cli("verify-gpu", f"gpunode@{lab.network.address(201)}")
    assert "UNREACHABLE" in human.stdout and "NOT healthy" not in human.stdout


@pytest.mark.lab
def test_collect_bundle_is_diagnosable(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    result = run_cli("collect", "-i", str(inventory), host.name, "--output", str(tmp_path))
    assert result.code == 0, result.output
    bundle = Path(result.stdout.strip().splitlines()[-1])
    with tarfile.open(bundle) as tar:
        names = {Path(n).name for n in tar.getnames() if n not in (".", "./")}
        tar.extractall(tmp_path / "bundle", filter="data")
    assert {"kernel-log.txt", "uname.txt", "nvidia-smi-missing.txt", "gpunode-evidence.txt"} <= names
    verified = json.loads(run_cli("verify-gpu", "-i", str(inventory), host.name, "--json").stdout)
    for target in (bundle, tmp_path / "bundle"):  # the tar.gz as written, and unpacked
        diagnosed = run_cli("diagnose", str(target), "--json")  # files as positional arguments
        assert "Traceback" not in diagnosed.output
        report = json.loads(diagnosed.stdout)
        jsonschema.validate(report, SCHEMA)
        assert len(report["files"]) == len(names)
        not_understood = [(f["path"], f["kind"], f["message"]) for f in report["files"] if not f["ok"]]
        assert not_understood == []  # every file recognised, or listed as not applicable
        assert (report["healthy"], report["verdict"]) == (verified["healthy"], verified["verdict"])
        critical = sorted(f["id"] for f in report["findings"] if f["severity"] == "critical")
        assert critical == sorted(f["id"] for f in verified["findings"] if f["severity"] == "critical")
        assert diagnosed.code == result_code(verified)


def result_code(report: dict) -> int:
    return {True: 0, False: 1, None: 2}[report["healthy"]]


def test_diagnose_without_any_file_is_not_healthy():
    result = run_cli("diagnose")
    assert result.code == 2 and "HEALTHY" not in result.output and "Traceback" not in result.output
    assert "no file given" in result.stderr and "gpunode diagnose FILE" in result.stderr


@needs_fixtures
def test_diagnose_cli_on_fixtures():
    mismatch = next((FIXTURES / "errors").glob("nvidia-smi__nvml-driver-library-mismatch__*.txt"))
    xml = FIXTURES / "xml" / "telegraf__a100-sxm4-v12.xml"
    result = run_cli("diagnose", "--file", str(mismatch), "--file", str(xml), "--json")
    assert result.code == 1
    data = json.loads(result.stdout)
    assert "driver-library-mismatch" in [f["id"] for f in data["findings"]]
    positional = run_cli("diagnose", str(mismatch), str(xml), "--json")
    assert positional.code == 1 and json.loads(positional.stdout) == data
    bad = run_cli("diagnose", "--file", "/nonexistent/capture.xml")
    assert bad.code == 2 and "missing: cannot read file" in bad.stdout and "HEALTHY" not in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.lab
def test_verify_gpu_reports_expected_mounts_from_inventory(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    expected = [{"server": "nas.example.com", "export": "/data", "path": "/mnt/data", "vendor": "aws-efs"}]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", expected_mounts=expected)
    result = run_cli("verify-gpu", "-i", str(inventory), host.name, "--json")
    findings = {f["id"]: f for f in json.loads(result.stdout)["findings"]}
    assert findings["nfs-mount-missing"]["severity"] == "critical"
    assert "/mnt/data is not mounted" in findings["nfs-mount-missing"]["summary"]


def test_unhealthy_and_unreachable_hosts_both_reported_exit_1(tmp_path):
    """The exit code rule (docs/guide.md, Exit codes): one unhealthy host (this controller, checked locally: it has
    no GPU) and one unreachable host (a closed loopback port) give exit 1, and the JSON and JUnit reports keep both,
    the unreachable one as a JUnit <error> (issue 37: it was left out, and its exit 2 hid the unhealthy host)."""
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    localhost: {ansible_connection: local}\n"
                         "    dead: {ansible_host: 127.0.0.1, ansible_port: 1}\n")
    junit = tmp_path / "v.xml"
    result = run_cli("verify-gpu", "all", "-i", str(inventory), "--json", "--junit", str(junit))
    assert result.code == 1, result.output
    reports = {r["host"]: r for r in json.loads(result.stdout)}
    assert (reports["localhost"]["verdict"], reports["dead"]["verdict"]) == ("unhealthy", "unreachable")
    assert "refused the connection" in reports["dead"]["error"]
    suites = {s.get("name"): s for s in ET.fromstring(junit.read_text()).findall("testsuite")}
    assert suites["localhost"].get("failures") == "1"
    error = suites["dead"].find("testcase/error")
    assert error is not None and "refused the connection" in error.get("message")
    assert suites["dead"].get("errors") == "1"
