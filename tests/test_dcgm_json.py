"""`dcgmi diag -j` / nvvs JSON (issue 38): the reader on real captures (tests/data/dcgm_json, see its SOURCES.md),
the findings it gives (the text reader's ids), and `gpunode diagnose` exit codes matching the text form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.parsers.dcgmi import dcgmi_findings, dcgmi_gpus, is_dcgmi_diag
from gpunode.parsers.dcgmi_json import dcgmi_json_documents, dcgmi_json_results
from gpunode.verify import diagnose_files
from gpunode.verify.captures.blocks import split_blocks
from tests.conftest import run_cli

DATA = Path(__file__).resolve().parent / "data"
JSON = DATA / "dcgm_json"
ISSUE_139 = JSON / "NVIDIA-DCGM-139__dcgmi-diag-r3-j-3.3.1-t400-skip-cut.json"
REAL_OUTPUT = JSON / "NVIDIA-DCGM__JsonResultTests-real-output-3.1.0-8gpu-pass.json"
SM_STRESS_FAIL = JSON / "NVIDIA-DCGM__TestDiagManagerStrings-per-gpu-sm-stress-fail.json"
TEXT_FAIL = DATA / "captures/dcgmi/NVIDIA-DCGM-49__dcgmi-diag-pcie-fail-nvlink-down-wrapped.txt"
TEXT_PASS = DATA / "captures/dcgmi/NVIDIA-DCGM-55__dcgmi-diag-r3-deployment-pass-prompt.txt"

# Constructed, not captured: the 4.x layout as dcgmi/Diag.cpp (NVIDIA/DCGM 72fa3feaa67d, HelperJsonBuildOutput /
# HelperJsonAddResult / HelperJsonAddTestSummary) writes it. No real 4.x `-j` output was found.
DCGM4 = {"DCGM Diagnostic": {
    "test_categories": [
        {"category": "Deployment", "tests": [
            {"name": "software", "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Skip"}],
             "test_summary": {"status": "Pass"}}]},
        {"category": "Hardware", "tests": [
            {"name": "memory", "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass",
                 "info": ["Allocated 83618558100 bytes (98.4%)"]},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail",
                 "warnings": [{"warning": "GPU 1 has uncorrectable memory errors", "error_id": 95,
                               "error_category": 3, "error_severity": 2}]}],
             "test_summary": {"status": "Fail"}},
            {"name": "pcie", "test_summary": {"status": "Warn", "warnings": [{"warning": "host bandwidth low"}]}}]}],
    "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                       "entities": [{"entity_id": 0, "device_id": "2330"}, {"entity_id": 1, "device_id": "2330"}]}],
    "metadata": {"version": "4.4.1", "Driver Version Detected": "580.76.05"}}}


def _rows(path: Path) -> list[tuple[str, str, str | None, str]]:
    docs, _ = dcgmi_json_documents(path.read_text())
    assert len(docs) == 1
    return [(r.category, r.test, r.gpu, r.status) for r in dcgmi_json_results(docs[0])]


def test_issue_139_every_test_skipped_on_gpu_0():
    assert _rows(ISSUE_139) == [("Integration", "PCIe", "0", "Skip"), ("Hardware", "GPU Memory", "0", "Skip"),
                                ("Hardware", "Diagnostic", "0", "Skip"), ("Hardware", "EUD Test", "0", "Skip"),
                                ("Stress", "Targeted Stress", "0", "Skip")]
    # every result Skip: nothing was tested, which is said (a warning), never read as a pass
    count, found = dcgmi_findings(ISSUE_139.read_text())
    assert count == 5 and [(f.id, f.severity) for f in found] == [("dcgm-diag-skipped", "warning")]
    assert "all 5 test result(s) were Skip" in found[0].summary and "Targeted Stress: Skip" in found[0].evidence
    assert diagnose_files([ISSUE_139]).verdict == "unknown"


def test_real_output_passes_on_eight_gpus_despite_the_warning_line_and_nulls():
    rows = _rows(REAL_OUTPUT)
    assert len(rows) == 17 and {status for *_, status in rows} == {"Pass"}
    assert rows[0] == ("Deployment", "Denylist", "0,1,2,3,4,5,6,7", "Pass")
    assert rows[9:] == [("Custom", "software", str(n), "Pass") for n in range(8)]
    assert dcgmi_gpus(REAL_OUTPUT.read_text()) == {f"dcgm-gpu-{n}" for n in range(8)}
    assert dcgmi_findings(REAL_OUTPUT.read_text())[1] == []


def test_sm_stress_fails_on_gpus_0_2_3():
    rows = _rows(SM_STRESS_FAIL)
    assert len(rows) == 38
    assert [r for r in rows if r[1] == "sm_stress"] == [
        ("Stress", "sm_stress", "0", "Fail"), ("Stress", "sm_stress", "1", "Pass"),
        ("Stress", "sm_stress", "2", "Fail"), ("Stress", "sm_stress", "3", "Fail")]
    assert [r for r in rows if r[1] == "memory"] == [
        ("Hardware", "memory", "0", "Skip"), *[("Hardware", "memory", str(n), "Pass") for n in (1, 2, 3)]]
    assert {r[3] for r in rows if r[1] in ("diagnostic", "memory_bandwidth", "targeted_stress", "targeted_power")} \
        == {"Skip"}
    results = dcgmi_json_results(dcgmi_json_documents(SM_STRESS_FAIL.read_text())[0][0])
    assert results[26].warnings == ["Max stress level of 2128.7 did not exceed desired stress level of 3000.0 "
                                    "for GPU 0"]
    assert results[27].info == ["GPU 1 relative stress level:\t577", "GPU 1 temperature average:\t32 C"]
    tests, findings = dcgmi_findings(SM_STRESS_FAIL.read_text())
    assert tests == 38 and [(f.id, f.severity) for f in findings] == [("dcgm-diag-failed", "critical")]
    assert findings[0].evidence.startswith("sm_stress: Fail - GPU: 0 (Max stress level of 2128.7")
    assert "sm_stress: Fail - GPU: 2" in findings[0].evidence and "sm_stress: Fail - GPU: 3" in findings[0].evidence


def test_dcgm4_layout_entity_results_and_test_summary():
    text = json.dumps(DCGM4, indent=4)
    rows = [(r.test, r.gpu, r.status) for r in dcgmi_json_results(dcgmi_json_documents(text)[0][0])]
    assert rows == [("software", "0", "Pass"), ("software", "1", "Skip"), ("memory", "0", "Pass"),
                    ("memory", "1", "Fail"), ("pcie", None, "Warn")]
    _, findings = dcgmi_findings(text)
    assert [(f.id, f.severity) for f in findings] == [("dcgm-diag-failed", "critical"),
                                                      ("dcgm-diag-warning", "warning")]
    assert findings[0].evidence.startswith("memory: Fail - GPU: 1 (GPU 1 has uncorrectable memory errors)")
    assert findings[1].evidence == "pcie: Warn - (host bandwidth low)"


@pytest.mark.parametrize(("path", "kinds"), [(ISSUE_139, ["dcgmi-diag"]), (SM_STRESS_FAIL, ["dcgmi-diag"]),
                                             (REAL_OUTPUT, ["unknown", "dcgmi-diag"])])  # its WARNING line
def test_recognised_as_one_dcgmi_block(path, kinds):
    text = path.read_text()
    assert is_dcgmi_diag(text)
    assert [b.kind for b in split_blocks(text)] == kinds


def test_json_between_other_outputs_keeps_its_neighbours():
    text = (f"$ dcgmi diag -r 3 -j\n{SM_STRESS_FAIL.read_text()}\n$ nvidia-smi -L\n"
            "GPU 0: Tesla T4 (UUID: GPU-39cd9454-0976-646a-acef-01a35ad02034)\n")
    assert [b.kind for b in split_blocks(text)] == ["dcgmi-diag", "smi-list"]


def test_other_json_is_not_taken_for_dcgmi():
    assert not is_dcgmi_diag('{"DCGM Diagnostic": "not an object"}')
    assert not is_dcgmi_diag('{"diag": {"test_categories": []}}')
    # dcgmi/Diag.cpp HelperDisplayFailureMessage: a run that could not start; left to the error readers
    assert not is_dcgmi_diag('{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "NVVS binary not found"}}')


def test_findings_through_diagnose_files():
    ids = [f.id for f in diagnose_files([SM_STRESS_FAIL]).findings]
    assert ids.count("dcgm-diag-failed") == 1
    assert not [f.id for f in diagnose_files([REAL_OUTPUT]).findings if f.id.startswith("dcgm-")]


def test_cli_exit_codes_match_the_text_form():
    text_fail, text_pass = run_cli("diagnose", str(TEXT_FAIL)).code, run_cli("diagnose", str(TEXT_PASS)).code
    assert run_cli("diagnose", str(SM_STRESS_FAIL)).code == text_fail == 1
    assert run_cli("diagnose", str(REAL_OUTPUT)).code == text_pass == 0
    assert run_cli("diagnose", str(ISSUE_139)).code == 2  # every test skipped: no verdict
