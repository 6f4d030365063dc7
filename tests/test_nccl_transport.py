"""NCCL transports from NCCL_DEBUG=INFO lines, nccl-tests captures end to end, "is this normal for this machine?"
with --expect-model/--expect-gpus, and a dcgmi diag JSON's PCIe bandwidths against the model's floor.

Real captures: tests/data/nccl (SOURCES.md), tests/data/dcgm_json. The few synthetic lines below are marked as such
and written from NVIDIA/nccl's format strings (gpunode/parsers/nccl_transport.py cites the file and line of each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.commands.verify_cmd import diagnose
from gpunode.parsers.nccl_tests import parse_nccl_tests
from gpunode.parsers.nccl_transport import is_nccl_debug, parse_nccl_transport, transport_findings
from gpunode.verify import Expectations, diagnose_files
from tests.conftest import run_cli

NCCL = Path(__file__).parent / "data" / "nccl"
DCGM = Path(__file__).parent / "data" / "dcgm_json"
SM_STRESS_FAIL = DCGM / "NVIDIA-DCGM__TestDiagManagerStrings-per-gpu-sm-stress-fail.json"
H100_EXCERPT = NCCL / "nccl-1161__h100_pcie_x2_nvlink_p2p_excerpt.txt"

# file -> (kind, {finding id: severity} that must be there, exit code of `gpunode diagnose FILE`)
CASES = {
    # 2x RTX 5090: NCCL found no P2P path (SHM only), then the run died on a CUDA error before its first size
    "nccl-tests-287__rtx5090x2_debug_info_shm_socket_fail.txt": (
        "nccl-tests", {"nccl-tests-failed": "critical", "nccl-no-p2p": "warning"}, 1),
    # GeForce: no published reference, so no bandwidth verdict (exit 2, saying what is missing)
    "nccl-tests-287__rtx5090x4_allreduce_pcie.txt": ("nccl-tests", {"nccl-no-reference": "warning"}, 2),
    "autodl-blog__rtx2080ti_x2_broadcast.txt": ("nccl-tests", {"nccl-no-reference": "warning"}, 2),
    "autodl-blog__rtx2080ti_x2_reduce.txt": ("nccl-tests", {"nccl-no-reference": "warning"}, 2),
    # no rank lines: the GPUs must be given (exit 2 until they are, see below); NVLink P2P was used
    "nccl-1161__h100_pcie_x2_nvlink_p2p_excerpt.txt": (
        "nccl-tests", {"nccl-no-reference": "warning", "nccl-transport": "ok"}, 2),
    # a 16-rank job whose two hosts talked over TCP sockets
    "nccl-398__aws_2x8_v100_ring_p2p_ipc_net_socket_excerpt.txt": ("nccl-debug", {"nccl-net-socket": "warning"}, 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_kind_findings_and_exit_code(name: str) -> None:
    kind, expected, code = CASES[name]
    result = diagnose_files([NCCL / name])
    assert [f.kind for f in result.files] == [kind]
    severities = {f.id: f.severity for f in result.findings}
    assert {i: severities.get(i) for i in expected} == expected
    assert diagnose([str(NCCL / name)], False, Expectations()) == code


def test_new_captures_have_sources() -> None:
    sources = (NCCL / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"| {name} |" in sources for name in CASES)


def test_collectives_of_the_new_captures() -> None:
    named = {name: parse_nccl_tests((NCCL / name).read_text()).collective for name in CASES}
    assert named["autodl-blog__rtx2080ti_x2_broadcast.txt"] == "broadcast"
    assert named["autodl-blog__rtx2080ti_x2_reduce.txt"] == "reduce"
    assert named["nccl-tests-287__rtx5090x4_allreduce_pcie.txt"] == "all_reduce"


def test_rank_lines_before_debug_lines_and_blank_lines_stay_with_the_run() -> None:
    result = diagnose_files([NCCL / "nccl-tests-287__rtx5090x2_debug_info_shm_socket_fail.txt"])
    assert result.files[0].blocks == ["nccl-tests"] and "2 rank(s)" in result.files[0].message
    failed = next(f for f in result.findings if f.id == "nccl-tests-failed")
    assert "GENOA-06" in failed.summary and "Cuda failure 1 'invalid argument'" in failed.summary
    assert not any(f.id == "nccl-no-reference" for f in result.findings)  # nothing was measured to compare


def test_transports_read_from_real_logs() -> None:
    shm = parse_nccl_transport((NCCL / "nccl-tests-287__rtx5090x2_debug_info_shm_socket_fail.txt").read_text())
    assert shm.kinds == {"shm": 4} and shm.network == "Socket" and shm.p2p_support == 0 and shm.hosts == {"GENOA-06"}
    jobs = parse_nccl_transport((NCCL / "nccl-398__aws_2x8_v100_ring_p2p_ipc_net_socket_excerpt.txt").read_text())
    assert jobs.kinds == {"p2p": 15, "net-socket": 2} and len(jobs.hosts) == 2
    nvlink = parse_nccl_transport(H100_EXCERPT.read_text())
    assert nvlink.kinds == {"p2p": 1}
    assert [f.id for f in transport_findings(nvlink)] == ["nccl-transport"]


def test_p2p_turned_off_by_the_environment_is_named_as_such() -> None:
    # SYNTHETIC: lines in the format of NVIDIA/nccl src/graph/paths.cc:274 ("%s set by environment to %s") and
    # src/transport/shm.cc:116 ("Channel %02d : %d[%d] -> %d[%d] via SHM/direct"), as NVIDIA/nccl-tests issue 228
    # quotes the first ("NCCL_P2P_LEVEL set by environment to LOC") for an A100 NVSwitch node.
    log = ("node:1:2 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n"
           "node:1:3 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct\n")
    found = transport_findings(parse_nccl_transport(log), "all_reduce")
    assert [f.id for f in found] == ["nccl-p2p-disabled"]
    assert "NCCL_P2P_LEVEL=LOC" in found[0].summary and "says nothing about NVLink" in found[0].summary


def test_sockets_with_ib_disabled_say_why() -> None:
    # SYNTHETIC: src/misc/param.cc:100 ("%s set by environment to %lld.") and src/transport/net.cc:324 lines
    log = ("a:1:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
           "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n")
    found = transport_findings(parse_nccl_transport(log))
    assert [f.id for f in found] == ["nccl-net-socket"] and "(NCCL_IB_DISABLE=1)" in found[0].summary


def test_ib_and_old_shared_memory_lines() -> None:
    # SYNTHETIC: net.cc:324 with NET/IB and GDRDMA; v2.7.8 shm.cc:78 "via direct shared memory"
    log = ("a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
           "a:1:2 [1] NCCL INFO Channel 00 : 1[1a000] -> 2[af000] via direct shared memory\n")
    assert parse_nccl_transport(log).kinds == {"net-ib": 1, "shm": 1}
    assert is_nccl_debug(log) and not is_nccl_debug("plain text\nno nccl here\n")


def test_no_rank_lines_asks_for_the_gpus_then_judges_with_them() -> None:
    alone = diagnose_files([H100_EXCERPT])
    assert alone.verdict == "unknown" and "--expect-model" in alone.partial[0]
    model_only = diagnose_files([H100_EXCERPT], Expectations(expect_model="H100"))
    assert "--expect-gpus" in model_only.partial[0]
    judged = diagnose_files([H100_EXCERPT], Expectations(expect_gpus=2, expect_model="H100"))
    verdicts = [f for f in judged.findings if f.id.startswith("nccl-") and f.id != "nccl-transport"]
    assert verdicts and all(f.id != "nccl-no-reference" for f in verdicts)
    assert all("--expect-model/--expect-gpus" in f.summary for f in verdicts)
    assert not judged.partial


def test_cli_asks_for_the_model_with_exit_2() -> None:
    result = run_cli("diagnose", str(H100_EXCERPT))
    assert result.code == 2 and "--expect-model" in result.stdout


def test_dcgm_json_pcie_bandwidth_needs_the_model_then_uses_its_floor() -> None:
    alone = diagnose_files([SM_STRESS_FAIL])
    assert "dcgm-pcie-no-reference" in {f.id for f in alone.findings}
    assert any("--expect-model" in item for item in alone.partial)
    a100 = diagnose_files([SM_STRESS_FAIL], Expectations(expect_model="A100"))
    half = [f for f in a100.findings if f.id == "dcgm-pcie-pcie-half"]
    assert half and "12.13 GB/s is below the 21 GB/s floor for A100" in half[0].summary
    v100 = diagnose_files([SM_STRESS_FAIL], Expectations(expect_model="V100"))
    assert "dcgm-pcie-ok" in {f.id for f in v100.findings}
    assert not [f for f in v100.findings if f.id.startswith("dcgm-pcie") and f.severity == "critical"]


def test_dcgm_json_without_pcie_info_gives_no_pcie_finding() -> None:
    real = diagnose_files([DCGM / "NVIDIA-DCGM__JsonResultTests-real-output-3.1.0-8gpu-pass.json"])
    assert not [f for f in real.findings if f.id.startswith("dcgm-pcie")] and real.verdict == "healthy"
