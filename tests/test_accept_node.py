"""Real runs of scripts/accept_node.py on this machine (no GPU, no NVIDIA driver, no libcuda): the budget machinery,
the hard timeouts, the output forms, the config, the probe's paths that can run here, the embedded PTX.

What is NOT tested here, because no GPU can be had: the probe's GPU path itself (context, JIT of the PTX, the
kernel's values, the copies, peer access). The functions it calls and their types are pinned against cuda.h below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "accept_node.py"


def run(*args: str, path: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def doc(*args: str, path: str | None = None) -> tuple[dict, int]:
    result = run("--format", "json", "--config", "", *args, path=path)
    return json.loads(result.stdout), result.returncode


def checks(document: dict) -> dict[str, dict]:
    return {c["name"]: c for c in document["checks"]}


def fake_tool(folder: Path, name: str, body: str) -> None:
    """A stand-in tool on PATH. Used ONLY to exercise the timeout/budget machinery (a dcgmi that exists and hangs):
    no finding about a real tool's output is drawn from it."""
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def base_path(tmp_path: Path) -> str:
    """PATH with the fake tools' folder first; the system's folders after it (this machine has no NVIDIA tools)."""
    return f"{tmp_path}:/usr/bin:/bin"


def test_no_libcuda_is_a_finding_naming_the_library_and_the_fix() -> None:
    document, code = doc()
    cuda = checks(document)["cuda"]
    assert cuda["status"] == "fail" and code == 1
    [missing] = cuda["findings"]
    assert missing["id"] == "libcuda-missing" and "libcuda.so.1" in missing["summary"]
    assert "cannot open shared object file" in missing["summary"] and "provision" in missing["remedy"]


def test_persistence_is_not_passed_when_nvidia_smi_gave_no_gpu_list() -> None:
    """On this machine nvidia-smi is absent: there is no persistence mode to read, so that check says skip (it said
    pass, beside nvidia-smi's fail, in a trial on lab hosts)."""
    document, _ = doc()
    persistence = checks(document)["persistence"]
    assert persistence["status"] == "skip" and persistence["reason"] == "nvidia-smi did not answer"
    assert {"name": "persistence", "reason": "nvidia-smi did not answer"} in document["not_run"]


def test_no_gpu_list_is_not_a_passed_count() -> None:
    """Without nvidia-smi (this machine) and no expected count there is nothing to count: skip, not "pass" with 0 GPUs
    (a trial on lab hosts saw the pass)."""
    document, _ = doc()
    count = checks(document)["gpu-count"]
    assert count["status"] == "skip" and count["reason"] == "no GPU list to count (see nvidia-smi)"


def test_the_probe_reports_the_load_error_as_json() -> None:
    result = run("--probe", "kernel")
    probe = json.loads(result.stdout)
    assert result.returncode == 0 and probe["devices"] == [] and "libcuda.so.1" in probe["load_error"]


def test_quick_tier_overhead_here_is_a_few_seconds() -> None:
    """The whole quick tier (every check, the probe's child process) on a node without the tools: its own cost."""
    started = time.monotonic()
    document, _ = doc("--tier", "quick")
    wall = time.monotonic() - started
    assert document["budget_s"] == 60 and document["elapsed_s"] < 3 and wall < 5
    assert [c["name"] for c in document["checks"]] == ["nvidia-smi", "gpu-count", "fabric", "persistence", "cuda",
                                                       "dcgm-diag-1"]


def test_a_check_that_does_not_fit_the_budget_is_not_started_and_the_tier_stops(tmp_path: Path) -> None:
    """With a dcgmi on PATH (a stand-in that would answer at once), DCGM level 1's estimate (30 s) counts: a 20 s
    budget cannot hold it, so it is not started; the tier says where it stopped and why."""
    fake_tool(tmp_path, "dcgmi", "echo should-not-run > \"$0.ran\"")
    document, code = doc("--budget", "20", path=base_path(tmp_path))
    dcgm = checks(document)["dcgm-diag-1"]
    assert dcgm["status"] == "budget" and dcgm["seconds"] == 0
    assert "needs ~30 s" in dcgm["reason"] and "of the 20 s budget left" in dcgm["reason"]
    assert document["stopped_by_budget"] == "dcgm-diag-1"
    assert {"name": "dcgm-diag-1", "reason": dcgm["reason"]} in document["not_run"]
    assert not (tmp_path / "dcgmi.ran").exists()
    assert code == 1  # nvidia-smi is missing here: a failure outranks the budget's "could not judge"


def test_the_budget_stops_every_later_check(tmp_path: Path) -> None:
    document, _ = doc("--tier", "standard", "--budget", "5", path=base_path(tmp_path))
    by_name = checks(document)
    assert by_name["cuda"]["status"] == "budget" and "needs ~8 s" in by_name["cuda"]["reason"]
    assert all(by_name[n]["status"] == "budget" for n in ("dcgm-diag-1", "dcgm-diag-2", "bandwidth", "nccl"))
    assert all("stopped the tier at cuda" in by_name[n]["reason"] for n in ("dcgm-diag-2", "nccl"))


def test_the_budget_reason_never_shows_as_much_left_as_the_check_needs(tmp_path: Path) -> None:
    """A 9 s budget leaves a little under 8 s for the CUDA probe (estimate 8 s) once the runner's own 1 s is kept:
    the reason must not say "needs ~8 s, 8.0 s left" (rounded up), and it names the kept second; a 1 s budget is all
    kept for the runner, which is said rather than "0.0 s of the 1 s budget left" alone."""
    nine = checks(doc("--budget", "9", path=base_path(tmp_path))[0])["cuda"]
    assert nine["status"] == "budget" and "needs ~8 s, 7." in nine["reason"], nine["reason"]
    assert "1 s of it kept for the runner itself" in nine["reason"]
    one = checks(doc("--budget", "1", path=base_path(tmp_path))[0])["nvidia-smi"]
    assert "0.0 s of the 1 s budget left; 1 s of it kept for the runner itself" in one["reason"], one["reason"]
    tiny = checks(doc("--budget", "0.001", path=base_path(tmp_path))[0])["nvidia-smi"]
    assert "of the 0.001 s budget" in tiny["reason"]


def test_a_dcgm_run_that_skipped_every_test_could_not_judge(tmp_path: Path) -> None:
    """A dcgmi stand-in printing a REAL `dcgmi diag -r 3 -j` document (DCGM 3.3.1 on a Tesla T400, NVIDIA/DCGM issue
    139, tests/data/dcgm_json/SOURCES.md) in which every result is "Skip": it tested nothing, so the check could not
    judge (status error, the tier "unknown", exit 2), never a pass."""
    capture = REPO / "tests" / "data" / "dcgm_json" / "NVIDIA-DCGM-139__dcgmi-diag-r3-j-3.3.1-t400-skip-cut.json"
    fake_tool(tmp_path, "dcgmi", f"cat '{capture}'")
    document, _ = doc("--tier", "quick", path=base_path(tmp_path))
    dcgm = checks(document)["dcgm-diag-1"]
    assert dcgm["status"] == "error" and dcgm["findings"] == []
    assert "skipped all 5 of its test results: nothing was tested" in dcgm["reason"]
    assert "dcgmi diag -r 1 -v" in dcgm["reason"]


def test_a_hanging_tool_is_killed_at_its_timeout_with_its_children(tmp_path: Path) -> None:
    """A stand-in dcgmi that never answers and leaves a child behind: both are killed at the timeout the config
    gives; the check says timeout (a failure), and the tier goes on within its budget."""
    pidfile = tmp_path / "child.pid"
    fake_tool(tmp_path, "dcgmi", f"sleep 300 & echo $! > {pidfile}; wait")
    config = tmp_path / "accept.json"
    config.write_text(json.dumps({"timeouts": {"dcgm-diag-1": 2}, "estimates": {"dcgm-diag-1": 1}}))
    started = time.monotonic()
    result = run("--format", "json", "--config", str(config), path=base_path(tmp_path))
    wall = time.monotonic() - started
    document = json.loads(result.stdout)
    dcgm = checks(document)["dcgm-diag-1"]
    assert dcgm["status"] == "timeout" and 1.9 <= dcgm["seconds"] < 5 and wall < 8
    assert dcgm["findings"][0]["id"] == "dcgm-diag-hung" and result.returncode == 1
    assert _gone(int(pidfile.read_text()))


def _gone(pid: int) -> bool:
    """The process no longer runs: no such pid, or a zombie (killed, waiting for a reaper that may be slow here)."""
    time.sleep(0.2)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_a_tool_that_is_not_installed_says_how_to_install_it() -> None:
    document, _ = doc("--tier", "standard", "--budget", "600")
    by_name = checks(document)
    assert by_name["dcgm-diag-1"]["status"] == "not-installed"
    assert "docs.nvidia.com/datacenter/dcgm" in by_name["dcgm-diag-1"]["reason"]
    assert by_name["nccl"]["status"] == "not-installed" and "NCCL not run" in by_name["nccl"]["reason"]
    assert by_name["bandwidth"]["tool"] == "gpunode-probe" and "nvbandwidth is not installed" in \
        by_name["bandwidth"]["reason"]


def test_npd_form_is_one_line_of_at_most_80_characters_and_exit_1() -> None:
    """node-problem-detector cuts at max_output_length (default 80, pkg/custompluginmonitor/types/config.go:32)
    and reads exit 1 as NonOK (plugin/plugin.go:340-347)."""
    result = run("--format", "npd", "--config", "")
    out = result.stdout.rstrip("\n")
    assert result.returncode == 1 and "\n" not in out and 0 < len(out) <= 80
    assert out.startswith("nvidia-smi: nvidia-smi is not installed")


def test_slurm_form_is_one_line_naming_the_first_failure() -> None:
    result = run("--format", "slurm", "--config", "")
    out = result.stdout.rstrip("\n")
    assert result.returncode == 1 and "\n" not in out and '"' not in out and len(out) <= 200
    assert out.startswith("gpunode quick nvidia-smi: nvidia-smi is not installed")


def test_text_form_lists_every_check() -> None:
    out = run("--format", "text", "--config", "").stdout
    assert out.startswith("gpunode accept quick on ") and "FAIL" in out
    assert all(name in out for name in ("nvidia-smi", "gpu-count", "fabric", "persistence", "cuda", "dcgm-diag-1"))


def test_a_broken_config_is_exit_2_with_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "accept.json"
    config.write_text("{tier: quick")
    result = run("--config", str(config))
    assert result.returncode == 2 and "fix its JSON or remove it" in result.stderr and result.stdout == ""
    config.write_text(json.dumps({"tier": "fast"}))
    result = run("--config", str(config))
    assert result.returncode == 2 and "'fast'" in result.stderr and "Traceback" not in result.stderr


def test_the_config_file_gives_the_tier_and_expectations(tmp_path: Path) -> None:
    config = tmp_path / "accept.json"
    config.write_text(json.dumps({"tier": "standard", "budget": 900, "expect_gpus": 8}))
    document = json.loads(run("--config", str(config)).stdout)
    assert document["tier"] == "standard" and document["budget_s"] == 900 and document["expect_gpus"] == 8
    assert checks(document)["gpu-count"]["findings"][0]["summary"] == "0 GPU(s) answer, 8 expected"


def _module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("accept_node", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_embedded_ptx_passes_the_syntax_check_and_a_broken_one_does_not() -> None:
    node = _module()
    assert node.ptx_problems() == []
    assert run("--check-ptx").stdout.strip() == "PTX ok"
    broken = node.PTX.replace("st.global.u32 \t[%rd4], %r6;", "st.global.u32 \t[%rd9], %r6").replace(
        "bra \tDONE;", "bra \tEND;")
    problems = node.ptx_problems(broken)
    assert "register %rd9 used but not declared" in problems and "branch to undefined label END" in problems
    assert any(p.startswith("statement without ';'") for p in problems)


def test_curesult_names_are_cuda_h_values() -> None:
    """zspace/system.cuda-12.6@b3d92c837713 include/cuda.h (CUDA_VERSION 12060): CUDA_SUCCESS = 0 (line 2348),
    CUDA_ERROR_NO_DEVICE = 100 (2420), CUDA_ERROR_SYSTEM_NOT_READY = 802 (2815), CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
    = 803 (2822), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704 (2683), CUDA_ERROR_UNKNOWN = 999 (2976)."""
    node = _module()
    assert {k: node.CURESULT[k] for k in (0, 100, 802, 803, 704, 999)} == {
        0: "CUDA_SUCCESS", 100: "CUDA_ERROR_NO_DEVICE", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
        803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        999: "CUDA_ERROR_UNKNOWN"}
    assert len(node.CURESULT) == 97 and node.cu_name(12345) == "CUresult 12345"
    text = SCRIPT.read_text()
    assert '100: "CUDA_ERROR_NO_DEVICE",  # 2420' in text


def test_fabric_state_is_read_per_gpu_from_nvidia_smi_q() -> None:
    """The layout gpunode/parsers/smi_text.py reads (a GPU <bus id> header, an indented Fabric section with State
    and Status lines)."""
    node = _module()
    text = ("GPU 00000000:07:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    Fabric\n"
            "        State                             : In Progress\n"
            "        Status                            : N/A\n    Processes : None\n"
            "GPU 00000000:0F:00.0\n    Fabric\n        State : Completed\n        Status : Success\n")
    assert node._fabric_states(text) == {"00000000:07:00.0": ("In Progress", "N/A"),
                                         "00000000:0F:00.0": ("Completed", "Success")}


def test_the_runner_is_python_3_6_syntax_and_stdlib_only() -> None:
    """It is shipped to every distro gpunode supports: Python 3.6 syntax (ast's feature_version), standard
    library imports only, none of the 3.7+ calls it could slip into (subprocess capture_output/text)."""
    import ast

    source = SCRIPT.read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) and "__future__" not in imported
    assert "capture_output" not in source and "text=True" not in source


def test_fabric_states_of_real_nvidia_smi_q_captures() -> None:
    """tests/data/captures/text_q (SOURCES.md there): an 8x H100 SXM NVSwitch system reports Completed/Success for
    every GPU; a 4x A100 SXM4 and an L4 report N/A (no fabric state), which the check does not count as a failure."""
    node = _module()
    folder = REPO / "tests" / "data" / "captures" / "text_q"
    h100 = node._fabric_states((folder / "gls__H100SXMx8__nvidia-smi-a.txt").read_text())
    assert len(h100) == 8 and set(h100.values()) == {("Completed", "Success")}
    a100 = node._fabric_states((folder / "gls__A100SXMx4__nvidia-smi-a.txt").read_text())
    assert len(a100) == 4 and set(a100.values()) == {("N/A", "N/A")}


def test_fabric_in_progress_names_the_gpu_and_completed_passes() -> None:
    """The real 8x H100 capture passes; the same capture EDITED (GPU 00000000:2A:00.0's State "Completed" ->
    "In Progress", the state NVIDIA/gpu-operator issue 2781 reports while the driver says ready) fails naming
    that GPU by index, UUID and bus id; an A100's N/A is noted, not failed."""
    node = _module()
    text = (REPO / "tests" / "data" / "captures" / "text_q" / "gls__H100SXMx8__nvidia-smi-a.txt").read_text()
    args = node.parse_args(["--config", ""])
    ctx = node.Context(args, {})
    ctx.gpus = [{"index": 1, "uuid": "GPU-1", "bus_id": "00000000:2A:00.0", "name": "NVIDIA H100 80GB HBM3"}]
    assert node.fabric_findings(ctx, node._fabric_states(text)) == ([], None)
    head, _, tail = text.partition("GPU 00000000:2A:00.0")
    edited = head + "GPU 00000000:2A:00.0" + tail.replace("Completed", "In Progress", 1)
    [bad], _ = node.fabric_findings(ctx, node._fabric_states(edited))
    assert bad["id"] == "fabric-not-completed" and "'In Progress'" in bad["summary"]
    assert bad["part"] == {"index": 1, "uuid": "GPU-1", "bus_id": "00000000:2A:00.0", "name": "NVIDIA H100 80GB HBM3",
                           "link": "NVSwitch fabric"}
    a100 = (REPO / "tests" / "data" / "captures" / "text_q" / "gls__A100SXMx4__nvidia-smi-a.txt").read_text()
    assert node.fabric_findings(ctx, node._fabric_states(a100)) == ([], "no fabric state reported for 4 GPU(s)")


def test_kernel_params_point_at_each_argument_and_uuid_reads_as_nvidia_smi_prints_it() -> None:
    """What can be checked of the launch without a GPU: kernelParams is an array of pointers, each to one
    argument's value (cuda.h lines 16932-16937), in the PTX's parameter order (.u64 pointer, .u32 count); a CUuuid's
    16 bytes (cuda.h line 304-305) read as nvidia-smi's "GPU-8-4-4-4-12" form (e.g. the capture's
    GPU-1b724e78-eef5-4163-d43c-e4da15d41176 shape)."""
    import ctypes

    node = _module()
    dptr, count = ctypes.c_uint64(0x7F00DEADBEEF), ctypes.c_uint(1 << 20)
    params = node.kernel_params(dptr, count)
    assert ctypes.c_uint64.from_address(params[0]).value == 0x7F00DEADBEEF
    assert ctypes.c_uint.from_address(params[1]).value == 1 << 20
    assert ".param .u64 gpunode_fill_param_0,\n\t.param .u32 gpunode_fill_param_1" in node.PTX
    raw = bytes.fromhex("1b724e78eef54163d43ce4da15d41176")
    assert node._uuid_text(raw) == "GPU-1b724e78-eef5-4163-d43c-e4da15d41176"
    assert [node.expected_fill(i) for i in (0, 1, 2)] == [7, 10, 13]


def test_node_side_reads_nvbandwidth_host_copies_and_names_the_slow_gpu() -> None:
    """The node judges nvbandwidth's host copies itself (for the Slurm/NPD forms, without the controller's
    references): tests/data/nvbandwidth/rtx4090x8_gpu5_h2d_edited.txt (EDITED: GPU 5 halved, its SOURCES.md)."""
    node = _module()
    text = (REPO / "tests" / "data" / "nvbandwidth" / "rtx4090x8_gpu5_h2d_edited.txt").read_text()
    copies = node.nvbandwidth_host_copies(text)
    assert len(copies["devices"]) == 8 and copies["devices"][5]["h2d_gbs"] == 12.95
    ctx = node.Context(node.parse_args(["--config", ""]), {})
    [low] = node.peer_outliers(ctx, copies)
    assert low["id"] == "bandwidth-low" and low["part"]["index"] == 5 and "host-to-device 12.9" in low["summary"]
    real = (REPO / "tests" / "data" / "nvbandwidth" / "rtx4090x8_v0.2_excerpt.txt").read_text()
    assert node.peer_outliers(ctx, node.nvbandwidth_host_copies(real)) == []


def test_the_controller_says_a_missing_libcuda_once_however_many_checks_hit_it() -> None:
    """The burn-in tier's cuda, bandwidth and cuda-loop checks each find no libcuda on this machine (the real
    runner's document): the report lists the finding once, not three times."""
    from gpunode.accept.findings import document_findings

    document, _ = doc("--tier", "burn-in")
    hits = [c["name"] for c in document["checks"] for f in c["findings"] if f["id"] == "libcuda-missing"]
    assert len(hits) >= 2, hits
    assert [f.id for f in document_findings(document)].count("libcuda-missing") == 1
