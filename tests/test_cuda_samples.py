"""The CUDA samples' bandwidthTest and p2pBandwidthLatencyTest readers, on real captured outputs
(tests/data/cuda_samples/SOURCES.md): parsed fields, the kind diagnose gives each file, its findings and the exit
code of `gpunode diagnose`, each verdict taken from what the capture shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.commands.verify_cmd import diagnose
from gpunode.parsers.cuda_bandwidth_test import as_nvbandwidth, is_bandwidth_test, parse_bandwidth_test
from gpunode.parsers.cuda_p2p_test import as_nvbandwidth as p2p_as_nvbandwidth
from gpunode.parsers.cuda_p2p_test import is_p2p_test, p2p_findings, parse_p2p_test
from gpunode.verify import Expectations, diagnose_files
from tests.conftest import run_cli

DATA = Path(__file__).parent / "data" / "cuda_samples"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _exit(name: str, expectations: Expectations | None = None) -> int:
    return diagnose([str(DATA / name)], False, expectations or Expectations())


# file -> (kind, {finding id: severity} that must be there, exit code): the verdict each capture shows
CASES = {
    # GeForce pair without P2P (driver: CANNOT Access Peer): normal for that machine, said as a warning
    "autodl-blog__p2p_rtx2080ti_x2_cannot_access.txt": ("cuda-p2p", {"p2p-unavailable": "warning"}, 0),
    "nccl-tests-287__p2p_rtx5090x2_cannot_access.txt": ("cuda-p2p", {"p2p-unavailable": "warning"}, 0),
    # peer access granted, yet P2P copies at half the host-staged speed: P2P broken for every pair
    "nccl-814__p2p_6gpu_enabled_slower_excerpt.txt": ("cuda-p2p", {"p2p-not-working": "critical"}, 1),
    "ugache__p2p_dgx_station_4xv100_excerpt.txt": ("cuda-p2p", {"p2p-working": "ok"}, 0),
    "ugache__p2p_dgx1_8xv100_excerpt.txt": ("cuda-p2p", {"p2p-unavailable": "warning"}, 0),
    "ik_llama-619__p2p_3gpu_bidirectional_excerpt.txt": ("cuda-p2p", {"p2p-working": "ok"}, 0),
    # no published floor for a GeForce RTX 2080 Ti / a P100: no verdict, said as what is missing (exit 2)
    "autodl-blog__bandwidthtest_rtx2080ti.txt": ("cuda-bandwidthtest", {"bandwidthtest-no-reference": "warning"}, 2),
    "gearshifft-82__bandwidthtest_p100_numa_excerpt.txt": (
        # the catalogue's P100 PCIe floor (Gen3 x16: 9 GB/s): the run bound to the GPU's own socket meets it, so the
        # far-socket run is a binding warning, not a link fault
        "cuda-bandwidthtest", {"bandwidthtest-runs-differ": "warning", "bandwidthtest-pcie-half": "warning",
                               "bandwidthtest-pcie-low": "warning", "bandwidthtest-ok": "ok"}, 0),
}


def test_every_capture_has_a_case_and_a_source() -> None:
    files = {p.name for p in DATA.iterdir() if p.name != "SOURCES.md"}
    assert files == set(CASES)
    sources = _text("SOURCES.md")
    assert all(f"| {name} |" in sources for name in files)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_kind_findings_and_exit_code(name: str) -> None:
    kind, expected, code = CASES[name]
    result = diagnose_files([DATA / name])
    assert [f.kind for f in result.files] == [kind]
    severities = {f.id: f.severity for f in result.findings}
    assert {i: severities.get(i) for i in expected} == expected
    assert _exit(name) == code


def test_cli_exit_code_on_the_failing_p2p_capture() -> None:
    result = run_cli("diagnose", str(DATA / "nccl-814__p2p_6gpu_enabled_slower_excerpt.txt"))
    assert result.code == 1 and "p2p-not-working" in result.stdout


def test_p2p_rtx2080ti_fields() -> None:
    run = parse_p2p_test(_text("autodl-blog__p2p_rtx2080ti_x2_cannot_access.txt"))
    assert run.devices == {0: "NVIDIA GeForce RTX 2080 Ti", 1: "NVIDIA GeForce RTX 2080 Ti"}
    assert run.bus_ids == {0: "0000:b4:00", 1: "0000:b5:00"}
    assert run.access == {(0, 1): False, (1, 0): False}
    assert set(run.matrices) == {"uni-disabled", "uni-enabled-writes", "bid-disabled", "bid-enabled"}
    assert run.matrices["bid-enabled"][(0, 1)] == 6.10 and run.matrices["bid-disabled"][(0, 1)] == 6.12
    assert run.matrices["uni-disabled"][(0, 0)] == 541.84  # the diagonal (local copy) is read, not compared


def test_p2p_not_working_names_every_pair_and_the_numbers() -> None:
    found = p2p_findings(parse_p2p_test(_text("nccl-814__p2p_6gpu_enabled_slower_excerpt.txt")))
    assert [f.id for f in found] == ["p2p-not-working"]
    assert found[0].gpu is not None and len(found[0].gpu.split(", ")) == 15  # 6 GPUs: 15 pairs
    assert "GPU 0 <-> GPU 1 9.9 vs 20.1 GB/s" in found[0].summary and "unidirectional writes" in found[0].summary


def test_dgx1_pairs_without_peer_access_are_named_and_nvlink_pairs_are_not() -> None:
    run = parse_p2p_test(_text("ugache__p2p_dgx1_8xv100_excerpt.txt"))
    assert sum(1 for ok in run.access.values() if not ok) == 24  # 12 pairs, both directions
    found = p2p_findings(run)
    assert [f.id for f in found] == ["p2p-unavailable"]
    pairs = found[0].gpu.split(", ") if found[0].gpu else []
    assert len(pairs) == 12 and "0-4" in pairs and "0-3" not in pairs  # 0-3: NVLink, 96.91 GB/s


def test_p2p_enabled_matrix_as_nvbandwidth_keeps_no_diagonal_and_no_inaccessible_pair() -> None:
    run = p2p_as_nvbandwidth(parse_p2p_test(_text("nccl-814__p2p_6gpu_enabled_slower_excerpt.txt")))
    assert [m.testcase for m in run.matrices] == ["device_to_device_memcpy_read_ce",
                                                  "device_to_device_memcpy_write_ce"]
    assert all(value is not None and value < 20 for _, _, value in run.matrices[1].cells())
    assert len(run.matrices[1].cells()) == 30  # 6 x 6 without the diagonal


def test_bandwidth_test_fields_gb_and_mb() -> None:
    run = parse_bandwidth_test(_text("autodl-blog__bandwidthtest_rtx2080ti.txt"))
    assert run.devices == {0: "NVIDIA GeForce RTX 2080 Ti"} and run.passed is True
    assert [(r.direction, r.memory, r.devices, r.sizes) for r in run.results] == [
        ("h2d", "PINNED", 1, [(32000000, 12.2)]), ("d2h", "PINNED", 1, [(32000000, 13.2)]),
        ("d2d", "PINNED", 1, [(32000000, 518.9)])]
    old = parse_bandwidth_test(_text("gearshifft-82__bandwidthtest_p100_numa_excerpt.txt").split("$ numactl -m1")[1])
    assert old.devices == {0: "Tesla P100-PCIE-16GB"} and old.results[0].sizes == [(33554432, 3.783)]  # MB/s read


def test_bandwidth_test_as_nvbandwidth_is_judged_against_the_model_floor() -> None:
    run = as_nvbandwidth(parse_bandwidth_test(_text("autodl-blog__bandwidthtest_rtx2080ti.txt")))
    assert [(m.testcase, m.columns, m.rows) for m in run.matrices] == [
        ("host_to_device_memcpy_ce", [0], [(0, [12.2])]), ("device_to_host_memcpy_ce", [0], [(0, [13.2])])]
    # what a user says the GPU is decides the floor: 12.2 GB/s is about half of an A100's 21 GB/s
    judged = diagnose_files([DATA / "autodl-blog__bandwidthtest_rtx2080ti.txt"], Expectations(expect_model="A100"))
    assert {f.id for f in judged.findings} == {"bandwidthtest-pcie-half"}
    assert "21 GB/s floor for A100" in judged.findings[0].summary and judged.findings[0].gpu == "0"


def test_missing_model_is_asked_for() -> None:
    result = diagnose_files([DATA / "autodl-blog__bandwidthtest_rtx2080ti.txt"])
    assert result.verdict == "unknown"
    assert any("floors exist for A100" in item for item in result.partial)


def test_recognisers_keep_to_their_own_output() -> None:
    p2p, bw = _text("ugache__p2p_dgx_station_4xv100_excerpt.txt"), _text("autodl-blog__bandwidthtest_rtx2080ti.txt")
    assert is_p2p_test(p2p) and not is_bandwidth_test(p2p)
    assert is_bandwidth_test(bw) and not is_p2p_test(bw)
