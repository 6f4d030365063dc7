"""nccl-tests output: parser fields checked against real captures, findings, and the reference table's sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.parsers.nccl_findings import nccl_findings, references
from gpunode.parsers.nccl_tests import is_nccl_tests, parse_nccl_tests

DATA = Path(__file__).parent / "data" / "nccl"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_a3mega_two_hosts_of_eight_h100() -> None:
    run = parse_nccl_tests(_read("a3mega_2x8_h100_allreduce.txt"))
    assert run.collective == "all_reduce"
    assert run.n_ranks == 16 and run.n_gpus_per_thread == 1
    assert run.models == ["NVIDIA H100 80GB HBM3"]
    assert run.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert (run.min_bytes, run.max_bytes) == (8, 8589934592)
    assert len(run.rows) == 31 and run.rows[-1].size == 8589934592
    assert run.rows[-1].busbw_out == 338.82 and run.rows[-1].busbw_in == 337.35
    assert run.max_busbw() == 338.82 and run.avg_busbw == 70.742
    assert run.wrong == 0 and run.out_of_bounds == 0


def test_a3mega_has_no_reference_and_says_so() -> None:
    found = nccl_findings(parse_nccl_tests(_read("a3mega_2x8_h100_allreduce.txt")))
    assert [f.id for f in found] == ["nccl-no-reference"]
    assert "16x NVIDIA H100" in found[0].summary and "no bandwidth verdict" in found[0].summary


def test_sendrecv_without_rank_lines() -> None:
    run = parse_nccl_tests(_read("a100x8_sendrecv.md"))
    assert run.collective == "sendrecv" and run.ranks == []
    assert [r.size for r in run.rows] == [134217728, 268435456, 536870912, 1073741824]
    assert run.rows[0].wrong_in is None and run.rows[0].wrong_out == 0  # in-place "#wrong" is N/A
    assert run.max_busbw() == 195.56
    found = nccl_findings(run)
    assert [f.id for f in found] == ["nccl-no-reference"] and found[0].severity != "ok"


@pytest.mark.parametrize("name", ["a3mega_2x8_h100_allreduce.txt", "a100x8_sendrecv.md",
                                  "rtx2080ti_x2_pcie_allreduce.txt"])
def test_captures_are_recognised(name: str) -> None:
    assert is_nccl_tests(_read(name))


def _synthetic(busbw: str, wrong: str = "0") -> str:
    """A run shaped like src/util.cu's output, 8 ranks of one model, one 16 GiB row."""
    ranks = "".join(f"#  Rank {i:2d} Group  0 Pid   100 on node device {i:2d} [0x00] NVIDIA H100 80GB HBM3\n"
                    for i in range(8))
    return ("./build/all_reduce_perf -b 16G -e 16G -g 8\n"
            "# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 5\n"
            + ranks + "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            f" 17179869184 4294967296 float sum -1 1 1 {busbw} {wrong} 1 1 {busbw} 0\n"
            f"# Out of bounds values : {wrong} OK\n# Avg bus bandwidth    : {busbw}\n")


def test_below_and_within_reference() -> None:
    low = nccl_findings(parse_nccl_tests(_synthetic("300.0")), expect_model=None)
    assert [f.id for f in low] == ["nccl-busbw-low"] and low[0].severity == "critical"
    assert "460 GB/s" in low[0].summary and "16 GiB" in low[0].summary and "8x NVIDIA H100" in low[0].summary
    assert "conf/nd96is" in low[0].summary
    ok = nccl_findings(parse_nccl_tests(_synthetic("470.0")))
    assert [f.id for f in ok] == ["nccl-busbw-ok"]


def test_wrong_results_are_critical() -> None:
    found = nccl_findings(parse_nccl_tests(_synthetic("470.0", wrong="12")))
    assert found[0].id == "nccl-wrong-results" and found[0].severity == "critical"


def test_references_carry_their_source() -> None:
    refs = references()
    assert refs
    for ref in refs:
        src = ref["source"]
        assert src["repo"] == "Azure/azurehpc-health-checks" and len(src["commit"]) == 40
        assert src["path"].startswith("conf/") and int(src["line"]) > 0
        assert ref["busbw_gbs"] > 0 and ref["message_bytes"] > 0 and ref["gpus"] > 0


def test_other_captures_are_not_claimed() -> None:
    others = [p for p in (Path(__file__).parent / "data").rglob("*") if p.is_file() and "nccl" not in p.parts
              and p.suffix in {".txt", ".log", ".xml", ".csv"}]
    claimed = [p.name for p in others if is_nccl_tests(p.read_text(encoding="utf-8", errors="replace"))]
    assert claimed == []


@pytest.mark.parametrize("name", ["a3mega_2x8_h100_allreduce.txt", "a100x8_sendrecv.md",
                                  "rtx2080ti_x2_pcie_allreduce.txt"])
def test_diagnose_reads_nccl_tests_and_gives_no_verdict_without_reference(name: str) -> None:
    from gpunode.verify.diagnose import diagnose_files

    result = diagnose_files([DATA / name])
    assert result.files[0].kind == "nccl-tests"
    assert "nccl-no-reference" in [f.id for f in result.findings]
    assert result.healthy is None and result.verdict == "unknown"


def test_detect_kind_names_nccl_tests() -> None:
    from gpunode.verify.captures.detect import detect_kind

    assert detect_kind(_read("a3mega_2x8_h100_allreduce.txt")) == "nccl-tests"


def test_rtx2080ti_pair_over_pcie() -> None:
    run = parse_nccl_tests(_read("rtx2080ti_x2_pcie_allreduce.txt"))
    assert run.collective == "all_reduce" and run.n_ranks == 2 and run.n_gpus_per_thread == 2
    assert run.models == ["NVIDIA GeForce RTX 2080 Ti"] and run.hosts == ["autodl-container-xxxxx"]
    assert len(run.rows) == 28 and run.busbw_at(1073741824) == 4.00
    assert run.avg_busbw == 2.05774 and run.wrong == 0
    assert [f.id for f in nccl_findings(run)] == ["nccl-no-reference"]


def test_a_cut_capture_says_what_it_lacks_not_none() -> None:
    """A real run pasted without its last lines (no `# Avg bus bandwidth`) or without its table: the evidence names
    what is missing; it printed `avg None GB/s` before."""
    judged = nccl_findings
    whole = (DATA / "a3mega_2x8_h100_allreduce.txt").read_text()
    cut = whole[:whole.index("# Avg bus bandwidth")]
    [finding] = [f for f in judged(parse_nccl_tests(cut)) if f.id == "nccl-no-reference"]
    assert finding.evidence == "max busbw 338.82 GB/s, no `# Avg bus bandwidth` line"
    no_table = whole[:whole.index("#       size")]
    [bare] = [f for f in judged(parse_nccl_tests(no_table)) if f.id == "nccl-no-reference"]
    assert "None" not in bare.evidence and bare.evidence.startswith("no table row")
