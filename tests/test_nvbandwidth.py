"""nvbandwidth output: parser fields checked against real captures, findings against the floors and the GPU's peers,
diagnose end to end, and the reference table's sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.parsers.nvbandwidth import is_nvbandwidth, parse_nvbandwidth
from gpunode.parsers.nvbandwidth_findings import matching, nvbandwidth_findings, references
from tests.conftest import run_cli

DATA = Path(__file__).parent / "data" / "nvbandwidth"
CAPTURES = ["a100_sxm4_h2d_sm.txt", "a6000x6_d2d_read_ce.txt", "rtx4090x8_v0.2_excerpt.txt",
            "rtx4090x8_gpu5_h2d_edited.txt", "a100x8_d2d_assert_v0.7.txt"]


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_a100_sm_single_gpu() -> None:
    run = parse_nvbandwidth(_read("a100_sxm4_h2d_sm.txt"))
    assert (run.version, run.driver) == ("v0.8", "560.35.05")
    assert run.devices == {0: "NVIDIA A100-SXM4-40GB"} and run.bus_ids == {0: "00000000:99:00"}
    assert run.started == ["host_to_device_memcpy_sm"]
    [m] = run.matrices
    assert m.testcase == "host_to_device_memcpy_sm" and m.direction == "h2d" and m.unit == "GB/s"
    assert m.columns == [0] and m.rows == [(0, [25.13])] and m.total == 25.13


def test_a6000_device_to_device_matrix_with_na_diagonal() -> None:
    run = parse_nvbandwidth(_read("a6000x6_d2d_read_ce.txt"))
    assert run.version == "v0.8" and run.devices == {} and run.started == []
    [m] = run.matrices
    assert m.testcase == "device_to_device_memcpy_read_ce"  # from its SUM line: the Running line was elided
    assert m.direction == "d2d" and m.columns == [0, 1, 2, 3, 4, 5] and len(m.rows) == 6
    assert m.rows[0] == (0, [None, 26.34, 26.35, 21.95, 22.64, 21.80])
    assert m.rows[5] == (5, [21.86, 22.67, 22.01, 26.34, 26.35, None])
    assert all(values[row] is None for row, values in m.rows)
    assert len(m.cells()) == 30 and m.total == 715.53
    assert abs(sum(v for _, _, v in m.cells()) - 715.53) < 0.1  # SUM adds the unrounded values


def test_rtx4090_v02_layout() -> None:
    run = parse_nvbandwidth(_read("rtx4090x8_v0.2_excerpt.txt"))
    assert run.version == "v0.2" and run.models == ["NVIDIA GeForce RTX 4090"] and len(run.devices) == 8
    assert run.bus_ids == {}  # v0.2 printed names only
    h2d, d2h = run.matrices
    assert (h2d.testcase, h2d.direction, h2d.total) == ("host_to_device_memcpy_ce", "h2d", 205.04)
    assert h2d.rows == [(0, [25.50, 24.26, 23.90, 26.30, 26.28, 26.38, 26.09, 26.31])]
    assert (d2h.testcase, d2h.direction, d2h.total) == ("device_to_host_memcpy_ce", "d2h", 214.28)
    assert d2h.rows[0][1][4] == 27.10


def test_assert_run_has_devices_and_failure() -> None:
    run = parse_nvbandwidth(_read("a100x8_d2d_assert_v0.7.txt"))
    assert run.version == "v0.7" and len(run.devices) == 8 and run.bus_ids[7] == "00000000:9e:00"
    assert run.matrices == [] and run.started == ["device_to_device_memcpy_read_ce"]
    assert run.failures[0].startswith("Invalid value when checking the pattern")
    assert any(f.startswith("ASSERT in expression h_errorFlag == 0") for f in run.failures)
    found = nvbandwidth_findings(run)
    assert [f.id for f in found] == ["nvbandwidth-test-failed"]


@pytest.mark.parametrize("name", CAPTURES)
def test_captures_are_recognised(name: str) -> None:
    assert is_nvbandwidth(_read(name))


def test_edited_half_speed_gpu_is_named_without_reference() -> None:
    found = nvbandwidth_findings(parse_nvbandwidth(_read("rtx4090x8_gpu5_h2d_edited.txt")))
    assert [f.id for f in found] == ["nvbandwidth-no-reference", "nvbandwidth-pcie-half"]
    half = found[1]
    assert half.gpu == "5" and half.severity == "critical"
    assert "GPU 5: host_to_device_memcpy_ce 12.95 GB/s" in half.summary and "half width" in half.summary
    assert [f.id for f in nvbandwidth_findings(parse_nvbandwidth(_read("rtx4090x8_v0.2_excerpt.txt")))] == [
        "nvbandwidth-no-reference"]


def _synthetic(model: str, h2d: list[float], d2d: list[list[float | None]] | None = None) -> str:
    """An output shaped like output.cpp and inline_common.h print it (v0.8)."""
    devices = "".join(f"Device {i}: {model} (00000000:{0x18 + i:02x}:00)\n" for i in range(len(h2d)))
    header = "  " + "".join(f"{i:>10}" for i in range(len(h2d)))
    text = ("nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n\nCUDA Runtime Version: 12040\n"
            "CUDA Driver Version: 12040\nDriver Version: 550.54.15\n\nnode1\n" + devices + "\n"
            "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            f"{header}\n 0" + "".join(f"{v:>10.2f}" for v in h2d)
            + f"\n\nSUM host_to_device_memcpy_ce {sum(h2d):.2f}\n\n")
    if d2d:
        rows = "".join(f"{r:>2}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}" for v in row) + "\n"
                       for r, row in enumerate(d2d))
        total = sum(v for row in d2d for v in row if v is not None)
        text += ("Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
                 f"{header}\n{rows}\nSUM device_to_device_memcpy_read_ce {total:.2f}\n\n")
    return text + "NOTE: The reported results may not reflect the full capabilities of the platform.\n"


def test_below_floor_names_gpu_and_half_speed() -> None:
    text = _synthetic("NVIDIA H100 80GB HBM3", [55.1, 55.2, 26.0, 55.0, 40.0, 55.3, 55.2, 55.1])
    found = nvbandwidth_findings(parse_nvbandwidth(text))
    by_gpu = {f.gpu: f for f in found}
    assert [f.id for f in found] == ["nvbandwidth-pcie-half", "nvbandwidth-pcie-low"]
    assert "GPU 2 (00000000:1a:00): host_to_device_memcpy_ce 26 GB/s is below the 48 GB/s floor" in by_gpu["2"].summary
    assert "half width or one generation down" in by_gpu["2"].summary and "LnkSta" in by_gpu["2"].summary
    assert "conf/nd96is" in by_gpu["2"].summary
    assert by_gpu["4"].id == "nvbandwidth-pcie-low" and "40 GB/s" in by_gpu["4"].summary


def test_at_floor_is_ok_and_pair_below_nvlink_floor_is_named() -> None:
    ok = nvbandwidth_findings(parse_nvbandwidth(_synthetic("NVIDIA A100-SXM4-80GB", [25.0, 24.9])))
    assert [f.id for f in ok] == ["nvbandwidth-ok"] and "21 GB/s" in ok[0].summary
    d2d = [[None, 250.0], [120.0, None]]
    found = nvbandwidth_findings(parse_nvbandwidth(_synthetic("NVIDIA A100-SXM4-80GB", [25.0, 24.9], d2d)))
    assert [f.id for f in found] == ["nvbandwidth-ok", "nvbandwidth-p2p-low"]
    assert found[1].gpu == "1,0" and "GPU pair 1 -> 0" in found[1].summary and "238 GB/s" in found[1].summary


def test_pcie_a100_gets_no_nvlink_floor() -> None:
    d2d = [[None, 20.0], [20.0, None]]
    found = nvbandwidth_findings(parse_nvbandwidth(_synthetic("NVIDIA A100 80GB PCIe", [25.0, 24.9], d2d)))
    assert [f.id for f in found] == ["nvbandwidth-ok"]


def test_expect_model_supplies_the_reference() -> None:
    run = parse_nvbandwidth(_read("rtx4090x8_v0.2_excerpt.txt"))
    found = nvbandwidth_findings(run, expect_model="H100")
    assert {f.id for f in found} == {"nvbandwidth-pcie-half"} and len(found) == 16
    assert [f.id for f in nvbandwidth_findings(run, expect_model="A100")] == ["nvbandwidth-ok"]


def test_references_carry_their_source() -> None:
    refs = references()
    assert len(refs) >= 10
    for ref in refs:
        src = ref["source"]
        assert src["repo"] == "Azure/azurehpc-health-checks" and len(src["commit"]) == 40
        assert src["path"].startswith("conf/") and int(src["line"]) > 0
        assert ref["h2d_gbs"] > 0 and ref["gpus"] > 0 and "pcie" not in ref  # the link generation: no source here
    assert {r["h2d_gbs"] for r in matching("NVIDIA H100 80GB HBM3")} == {48.0}
    assert {r["h2d_gbs"] for r in matching("Tesla V100-SXM2-32GB")} == {9.0}
    assert matching("NVIDIA GeForce RTX 4090") == []


def test_other_captures_are_not_claimed() -> None:
    others = [p for p in (Path(__file__).parent / "data").rglob("*") if p.is_file() and "nvbandwidth" not in p.parts
              and p.suffix in {".txt", ".log", ".xml", ".csv", ".md"}]
    claimed = [p.name for p in others if is_nvbandwidth(p.read_text(encoding="utf-8", errors="replace"))]
    assert claimed == []


def test_detect_kind_names_nvbandwidth() -> None:
    from gpunode.verify.captures.detect import detect_kind

    assert detect_kind(_read("rtx4090x8_v0.2_excerpt.txt")) == "nvbandwidth"


@pytest.mark.parametrize("name", ["a100_sxm4_h2d_sm.txt", "a6000x6_d2d_read_ce.txt", "rtx4090x8_v0.2_excerpt.txt",
                                  "a100x8_d2d_assert_v0.7.txt"])
def test_diagnose_gives_no_verdict_without_reference(name: str) -> None:
    from gpunode.verify.diagnose import diagnose_files

    result = diagnose_files([DATA / name])
    assert result.files[0].kind == "nvbandwidth"
    assert result.healthy is None and result.verdict == "unknown"


def test_diagnose_cli_exit_codes(tmp_path: Path) -> None:
    edited = run_cli("diagnose", str(DATA / "rtx4090x8_gpu5_h2d_edited.txt"))
    assert edited.code == 1 and "nvbandwidth-pcie-half" in edited.stdout and "GPU 5" in edited.stdout
    low = run_cli("diagnose", str(DATA / "rtx4090x8_v0.2_excerpt.txt"), "--expect-model", "H100")
    assert low.code == 1 and "48 GB/s floor" in low.stdout
    partial = run_cli("diagnose", str(DATA / "rtx4090x8_v0.2_excerpt.txt"))
    assert partial.code == 2 and "nvbandwidth-no-reference" in partial.stdout
    good = tmp_path / "a100.txt"
    good.write_text(_synthetic("NVIDIA A100-SXM4-80GB", [25.0, 24.9]), encoding="utf-8")
    ok = run_cli("diagnose", str(good), "--expect-model", "A100")
    assert "nvbandwidth-ok" in ok.stdout and ok.code != 1
