"""`gpunode accept` on the controller: node documents in (shaped as scripts/accept_node.py writes them, the tools'
raw outputs real captures from tests/data with their SOURCES.md), findings, verdicts and exit codes out; and real
runs on `localhost` through gpunode's local connection (this machine: no GPU, no driver)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from gpunode.accept.findings import document_findings, probe_run
from gpunode.accept.node import AcceptRequest, read_document, remote_script
from gpunode.accept.report import AcceptReport
from gpunode.errors import GpunodeError

DATA = Path(__file__).parent / "data"


def node_doc(checks: list[dict], gpus: list[dict] | None = None, verdict: str = "pass", tier: str = "standard",
             budget: float = 1200) -> dict:
    """A node document as accept_node.py's document() writes it."""
    return {"kind": "gpunode-accept", "version": 1, "host": "n1", "tier": tier, "budget_s": budget,
            "elapsed_s": 12.5, "verdict": verdict, "exit_code": {"pass": 0, "fail": 1, "unknown": 2}[verdict],
            "gpus": gpus or [], "checks": checks, "stopped_by_budget": None, "not_run": []}


def check(name: str, status: str = "pass", **extra: object) -> dict:
    return {"name": name, "status": status, "seconds": 1.0, "estimate_s": 1, "timeout_s": 10, "findings": [],
            **extra}


def h100s(n: int = 8) -> list[dict]:
    return [{"index": i, "uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", "bus_id": f"00000000:{i + 1:02X}:00.0",
             "name": "NVIDIA H100 80GB HBM3", "persistence": "Enabled", "memory_mib": 81559} for i in range(n)]


def test_nvbandwidth_capture_names_the_half_speed_gpu() -> None:
    """tests/data/nvbandwidth/rtx4090x8_gpu5_h2d_edited.txt (EDITED: GPU 5's h2d halved, see its SOURCES.md)."""
    raw = (DATA / "nvbandwidth" / "rtx4090x8_gpu5_h2d_edited.txt").read_text()
    doc = node_doc([check("bandwidth", tool="nvbandwidth", raw={"nvbandwidth": raw})])
    found = document_findings(doc)
    half = [f for f in found if f.id == "nvbandwidth-pcie-half"]
    assert len(half) == 1 and half[0].gpu == "5" and "GPU 5: host_to_device_memcpy_ce 12.95 GB/s" in half[0].summary
    report = AcceptReport("n1", doc, found)
    assert report.healthy is False and report.verdict == "unhealthy"


def test_probe_measurements_go_through_nvbandwidth_findings_with_the_reference() -> None:
    """The probe's copies become an NvbRun; nvbandwidth_findings compares them with the A100 floor of the catalog
    and names the slow GPU by index and bus id."""
    devices = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "bus_id": f"0000:{i + 7:02x}:00.0", "uuid": f"GPU-{i}",
                "h2d_gbs": 24.5, "d2h_gbs": 25.0} for i in range(4)]
    devices[3]["h2d_gbs"] = 11.9
    probe = {"library": "libcuda.so.1", "mode": "bandwidth", "devices": devices, "pairs": []}
    doc = node_doc([check("bandwidth", tool="gpunode-probe", measurements={"probe": probe})])
    run = probe_run(doc, probe)
    assert run.matrix("host_to_device_memcpy_ce").cells()[3] == (0, 3, 11.9)
    found = document_findings(doc, expect_model="A100")
    low = [f for f in found if f.id.startswith("nvbandwidth-pcie")]
    assert [f.gpu for f in low] == ["3"] and "GPU 3 (0000:0a:00.0)" in low[0].summary
    assert "floor for A100" in low[0].summary and "azurehpc-health-checks" in low[0].summary


def test_probe_pairs_fill_the_device_to_device_matrix() -> None:
    devices = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "bus_id": f"0000:{i + 1:02x}:00.0", "h2d_gbs": 50.0,
                "d2h_gbs": 50.0} for i in range(2)]
    probe = {"devices": devices, "pairs": [{"src": 0, "dst": 1, "gbs": 350.0, "peer_access": True},
                                           {"src": 1, "dst": 0, "gbs": 20.0, "peer_access": False}]}
    run = probe_run(node_doc([]), probe)
    assert sorted(run.matrix("device_to_device_memcpy_read_ce").cells()) == [(0, 1, 20.0), (1, 0, 350.0)]


def test_nccl_tests_output_goes_to_nccl_findings() -> None:
    """tests/data/nccl/rtx2080ti_x2_pcie_allreduce.txt: a real run the table has no reference for - said so."""
    raw = (DATA / "nccl" / "rtx2080ti_x2_pcie_allreduce.txt").read_text()
    found = document_findings(node_doc([check("nccl", raw={"nccl-tests": raw})]))
    assert [f.id for f in found] == ["nccl-no-reference"]
    assert "2x NVIDIA GeForce RTX 2080 Ti" in found[0].summary


def test_nccl_below_the_reference_is_critical() -> None:
    """An 8x H100 all_reduce at 16 GiB below Azure's 460 GB/s floor (the catalog's nd96is_h100_v5 line)."""
    ranks = "".join(f"#  Rank {i:2d} Group  0 Pid   100 on node device {i:2d} [0x00] NVIDIA H100 80GB HBM3\n"
                    for i in range(8))
    raw = ("all_reduce_perf -b 8M -e 16G -f 2 -g 8\n# nThread 1 nGpus 8 minBytes 8388608 maxBytes 17179869184\n"
           + ranks + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time "
           "  algbw   busbw #wrong\n 17179869184 4294967296 float sum -1 1 1 300.0 0 1 1 300.0 0\n"
           "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 300.0\n")
    found = document_findings(node_doc([check("nccl", raw={"nccl-tests": raw})], h100s()))
    [low] = [f for f in found if f.id == "nccl-busbw-low"]
    assert low.severity == "critical" and "460 GB/s" in low.summary


def test_the_nodes_own_gpus_count_when_the_nccl_log_lost_its_rank_lines() -> None:
    """tests/data/nccl/nccl-1161 (real: 2x H100 PCIe over NVLink bridges, rank lines cut by its poster): the node's
    nvidia-smi GPUs give the count and model; the catalogue has no all_reduce floor for H100 PCIe (PCIe-only parts get
    none by rule, docs/gpu-models.md), so it says so for 2x H100 PCIe rather than for "an unknown number"."""
    raw = (DATA / "nccl" / "nccl-1161__h100_pcie_x2_nvlink_p2p_excerpt.txt").read_text()
    gpus = [{**g, "name": "NVIDIA H100 PCIe"} for g in h100s(2)]
    [finding] = document_findings(node_doc([check("nccl", raw={"nccl-tests": raw})], gpus))
    assert finding.id == "nccl-no-reference" and "all_reduce on 2x NVIDIA H100 PCIe" in finding.summary


def test_dcgm_json_names_each_failing_gpu() -> None:
    """tests/data/dcgm_json/NVIDIA-DCGM__TestDiagManagerStrings-per-gpu-sm-stress-fail.json: sm_stress fails on
    GPUs 0, 2 and 3; each finding names the GPU with its UUID and bus id from the node's nvidia-smi."""
    raw = (DATA / "dcgm_json" / "NVIDIA-DCGM__TestDiagManagerStrings-per-gpu-sm-stress-fail.json").read_text()
    node_own = {"id": "dcgm-diag-failed", "severity": "critical", "summary": "node's own", "part": {}}
    doc = node_doc([check("dcgm-diag-2", "fail", raw={"dcgmi": raw}, findings=[node_own])], h100s(4), "fail")
    failed = [f for f in document_findings(doc) if f.id == "dcgm-diag-failed"]
    assert [f.gpu for f in failed] == [
        "GPU 0 GPU-00000000-aaaa-bbbb-cccc-dddddddddddd 00000000:01:00.0",
        "GPU 2 GPU-00000002-aaaa-bbbb-cccc-dddddddddddd 00000000:03:00.0",
        "GPU 3 GPU-00000003-aaaa-bbbb-cccc-dddddddddddd 00000000:04:00.0"]
    assert all("sm_stress Fail" in f.summary for f in failed)


def test_node_findings_keep_their_part() -> None:
    gpu = {"index": 3, "uuid": "GPU-3", "bus_id": "00000000:07:00.0"}
    raw = {"id": "cuda-failed", "severity": "critical", "summary": "GPU 3: cuCtxCreate_v2 returned "
           "CUDA_ERROR_ECC_UNCORRECTABLE", "remedy": "drain", "part": gpu}
    [found] = document_findings(node_doc([check("cuda", "fail", findings=[raw])], verdict="fail"))
    assert found.gpu == "GPU 3 GPU-3 00000000:07:00.0" and "CUDA_ERROR_ECC_UNCORRECTABLE" in found.summary


def test_a_budget_stop_is_incomplete_not_healthy() -> None:
    stopped = check("dcgm-diag-1", "budget", seconds=0.0, reason="not run: the budget stopped the tier at "
                    "dcgm-diag-1 (needs ~30 s, 20.0 s of the 20 s budget left)")
    doc = node_doc([check("nvidia-smi"), check("cuda"), stopped], h100s(), "unknown", "quick", 20)
    found = document_findings(doc)
    assert [f.id for f in found] == ["accept-budget"] and "20 s budget stopped the quick tier" in found[0].summary
    report = AcceptReport("n1", doc, found)
    assert report.healthy is None and report.verdict == "incomplete"
    data = report.to_dict(raw=False)
    assert data["checks"][2]["status"] == "budget" and "node" not in data


def test_junit_of_an_incomplete_tier_is_not_green() -> None:
    """The exit code of a budget-stopped tier is 1: its JUnit XML must fail too (a CI reads one or the other), under
    accept's own suite name."""
    from gpunode.verify import junit_xml

    stopped = check("dcgm-diag-1", "budget", seconds=0.0, reason="not run: the budget stopped the tier")
    doc = node_doc([check("nvidia-smi"), check("cuda"), stopped], h100s(), "unknown", "quick", 20)
    passed = node_doc([check("nvidia-smi"), check("cuda")], h100s(), "pass", "quick", 60)
    data = [AcceptReport("n1", doc, document_findings(doc)).to_dict(raw=False),
            AcceptReport("n2", passed, document_findings(passed)).to_dict(raw=False)]
    root = ET.fromstring(junit_xml(data, "accept"))
    assert root.get("name") == "gpunode accept" and root.get("failures") == "1"
    n1, n2 = root.findall("testsuite")
    verdict = n1.find("testcase[@name='verdict']")
    assert verdict is not None and verdict.get("classname") == "gpunode.accept.n1"
    assert verdict.find("failure").get("type") == "incomplete"  # type: ignore[union-attr]
    assert n2.get("failures") == "0" and n2.find("testcase[@name='verdict']") is None


def test_not_installed_tools_are_warnings_with_the_install() -> None:
    reason = "dcgmi is not installed: install DCGM from NVIDIA's CUDA repository as https://docs.nvidia.com/..."
    found = document_findings(node_doc([check("dcgm-diag-1", "not-installed", reason=reason)]))
    assert [(f.id, f.severity) for f in found] == [("accept-not-installed-dcgm-diag-1", "warning")]
    assert found[0].remedy.startswith("install DCGM")


def test_remote_script_ships_the_runner_and_its_options() -> None:
    script = remote_script(AcceptRequest("standard", 300, 8, "H100 80GB"))
    assert "base64 -d > \"$d/accept.py\"" in script and "trap 'rm -rf \"$d\"' EXIT" in script
    assert script.rstrip().endswith("--format json --config '' --tier standard --budget 300 --expect-gpus 8 "
                                    "--expect-model 'H100 80GB'")
    completed = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert completed.returncode == 0, completed.stderr


def test_read_document_errors_name_host_step_and_fix() -> None:
    for stdout, code, words in (("", 127, "no python3"), ("Traceback ...", 1, "gave no result (exit 1)")):
        try:
            read_document(stdout, "", code, "n1")
        except GpunodeError as exc:
            assert words in str(exc) and exc.host == "n1"
        else:
            raise AssertionError("no error")


def gpunode(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpunode", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180)


def test_real_run_on_localhost_json_and_junit(tmp_path: Path) -> None:
    """The whole path: ship accept_node.py over gpunode's local connection, run the quick tier here, read it back."""
    junit = tmp_path / "accept.xml"
    result = gpunode("accept", "localhost", "--json", "--junit", str(junit), cwd=Path(__file__).parents[1])
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "accept" and data["verdict"] == "unhealthy" and data["tier"] == "quick"
    assert {f["id"] for f in data["findings"]} >= {"nvidia-smi-missing", "libcuda-missing"}
    assert data["node"]["checks"][4]["name"] == "cuda" and data["elapsed_s"] < 5
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "localhost" and int(suite.get("failures") or 0) >= 2


def test_one_unreachable_host_does_not_stop_the_others(tmp_path: Path) -> None:
    result = gpunode("accept", "localhost,gpunode-accept-test.invalid", "--json", "--budget", "30",
                     cwd=Path(__file__).parents[1])
    assert result.returncode == 1
    by_host = {r["host"]: r for r in json.loads(result.stdout)}
    assert by_host["localhost"]["tier"] == "quick" and by_host["localhost"]["budget_s"] == 30
    assert by_host["gpunode-accept-test.invalid"]["verdict"] == "unreachable"
    assert by_host["gpunode-accept-test.invalid"]["error"]


def test_bad_input_is_exit_2_before_any_host() -> None:
    for args, words in ((("--tier", "fast"), "unknown tier 'fast'"), (("--budget", "0"), "above 0"),
                        (("--budget", "soon"), "above 0"),
                        # a number above the bound: the message names the bound, not only "above 0"
                        (("--budget", "1e9"), "above 0 and below 10000000, got '1e9'")):
        result = gpunode("accept", "gpunode-accept-test.invalid", *args, cwd=Path(__file__).parents[1])
        assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr
