"""Verdicts against the model catalogue's floors (issue 38), through diagnose as a user runs it: a derived floor is
named as derived with its rule, PCIe and SXM parts get different floors, the GPU count comes from --expect-gpus when
the log does not say, and a model without a floor stays UNKNOWN (never healthy)."""

from __future__ import annotations

from pathlib import Path

from gpunode.parsers.nccl_findings import nccl_findings
from gpunode.parsers.nccl_tests import parse_nccl_tests
from gpunode.parsers.nvbandwidth import parse_nvbandwidth
from gpunode.parsers.nvbandwidth_findings import nvbandwidth_findings
from gpunode.verify.diagnose import diagnose_files
from gpunode.verify.evidence import Expectations
from tests.conftest import run_cli
from tests.test_nvbandwidth import _synthetic as _nvbandwidth  # nvbandwidth v0.8's own layout


def _all_reduce(busbw: str, model: str | None, gpus: int = 8, size: int = 17179869184) -> str:
    """all_reduce_perf output (src/util.cu's layout); no rank lines when `model` is None (a pasted table)."""
    ranks = "".join(f"#  Rank {i:2d} Group  0 Pid   100 on node device {i:2d} [0x00] {model}\n"
                    for i in range(gpus)) if model else ""
    return (f"./build/all_reduce_perf -b {size} -e {size} -g {gpus}\n"
            f"# nThread 1 nGpus {gpus} minBytes {size} maxBytes {size} step: 2(factor) warmup iters: 5\n"
            + ranks + "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            f" {size} {size // 4} float sum -1 1 1 {busbw} 0 1 1 {busbw} 0\n"
            f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {busbw}\n")


def test_t4_gets_its_derived_x8_floor() -> None:
    ok = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("Tesla T4", [6.1, 6.0])))
    assert [f.id for f in ok] == ["nvbandwidth-ok"]  # T4s at x8 (~6 GB/s) are within NVIDIA's spec
    assert "4.5 GB/s floor" in ok[0].summary and "derived:" in ok[0].summary and "x8/x16" in ok[0].summary
    mixed = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("Tesla T4", [12.2, 6.1])))
    assert [(f.id, f.gpu) for f in mixed] == [("nvbandwidth-ok", None), ("nvbandwidth-pcie-half", "1")]  # vs peers
    low = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("Tesla T4", [12.2, 1.0])))
    assert [(f.id, f.gpu) for f in low] == [("nvbandwidth-pcie-low", "1")]
    assert "below the 4.5 GB/s floor for Tesla T4" in low[0].summary


def test_h100_pcie_gets_no_nvlink_floor_but_sxm_does() -> None:
    d2d = [[None, 50.0], [50.0, None]]
    pcie = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("NVIDIA H100 PCIe", [53.0, 53.1], d2d)))
    assert [f.id for f in pcie] == ["nvbandwidth-ok"] and "48 GB/s" in pcie[0].summary
    assert "derived:" in pcie[0].summary  # no published floor for the PCIe card: the Gen5 rule
    sxm = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("NVIDIA H100 80GB HBM3", [53.0, 53.1], d2d)))
    assert [f.id for f in sxm] == ["nvbandwidth-ok", "nvbandwidth-p2p-low", "nvbandwidth-p2p-low"]
    assert "335 GB/s NVLink floor" in sxm[1].summary and "(published)" in sxm[1].summary


def test_h100_nvl_pair_floor_needs_the_gpu_count() -> None:
    d2d = [[None, 100.0], [100.0, None]]
    pair = nvbandwidth_findings(parse_nvbandwidth(_nvbandwidth("NVIDIA H100 NVL", [53.0, 53.1], d2d)))
    assert "nvbandwidth-p2p-low" in [f.id for f in pair]  # two cards: Azure's NC80adis_H100_v5 floor applies
    eight = _nvbandwidth("NVIDIA H100 NVL", [53.0] * 8)
    assert all(f.id != "nvbandwidth-p2p-low" for f in nvbandwidth_findings(parse_nvbandwidth(eight)))


def test_a10_has_no_floor_and_stays_unknown(tmp_path: Path) -> None:
    path = tmp_path / "a10.txt"
    path.write_text(_nvbandwidth("NVIDIA A10", [24.0]), encoding="utf-8")
    result = diagnose_files([path])
    assert "nvbandwidth-no-reference" in [f.id for f in result.findings]
    assert result.healthy is None and result.verdict == "unknown"
    assert "no published or derived floor" in next(f.summary for f in result.findings
                                                     if f.id == "nvbandwidth-no-reference")


def test_b200_all_reduce_against_the_derived_floor() -> None:
    ok = nccl_findings(parse_nccl_tests(_all_reduce("700.0", "NVIDIA B200")))
    assert [f.id for f in ok] == ["nccl-busbw-ok"] and "684 GB/s reference" in ok[0].summary
    assert "derived:" in ok[0].summary and "nd96amsr_a100_v4.conf:57" in ok[0].summary
    low = nccl_findings(parse_nccl_tests(_all_reduce("500.0", "NVIDIA B200")))
    assert [f.id for f in low] == ["nccl-busbw-low"] and low[0].severity == "critical"


def test_v100_sxm2_uses_azure_nd40rs_v2_at_8_gib() -> None:
    found = nccl_findings(parse_nccl_tests(_all_reduce("95.0", "Tesla V100-SXM2-32GB", size=8 << 30)))
    assert [f.id for f in found] == ["nccl-busbw-low"]
    assert "110 GB/s" in found[0].summary and "nd40rs_v2.conf:42" in found[0].summary and "8 GiB" in found[0].summary


def test_pasted_table_takes_model_and_count_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "allreduce.txt"
    path.write_text(_all_reduce("300.0", None), encoding="utf-8")
    unknown = diagnose_files([path], Expectations(expect_model="H100 SXM"))
    assert "nccl-no-reference" in [f.id for f in unknown.findings] and unknown.verdict == "unknown"
    told = diagnose_files([path], Expectations(expect_gpus=8, expect_model="H100 SXM"))
    low = next(f for f in told.findings if f.id == "nccl-busbw-low")
    assert "8x H100 SXM (NVIDIA H100 SXM5 80GB)" in low.summary and "460 GB/s" in low.summary
    assert told.healthy is False
    cli = run_cli("diagnose", str(path), "--expect-model", "H100 SXM", "--expect-gpus", "8")
    assert cli.code == 1 and "nccl-busbw-low" in cli.stdout and "460 GB/s" in cli.stdout


def test_two_hosts_get_no_single_node_floor() -> None:
    ranks = "".join(f"#  Rank {i:2d} Group  0 Pid   100 on host{i // 8} device {i % 8:2d} [0x00] NVIDIA B200\n"
                    for i in range(16))
    text = _all_reduce("300.0", None, gpus=16).replace("#       size", ranks + "#       size", 1)
    found = nccl_findings(parse_nccl_tests(text))
    assert [f.id for f in found] == ["nccl-no-reference"] and "across 2 hosts" in found[0].summary
