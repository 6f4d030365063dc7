"""diagnose's Files line on pasted logs as a user pastes them (real captures, concatenated as from one terminal)."""

from __future__ import annotations

from pathlib import Path

from gpunode.verify.diagnose import diagnose_files

DATA = Path(__file__).parent / "data"
RTX5090 = DATA / "nccl" / "nccl-tests-287__rtx5090x4_allreduce_pcie.txt"  # its prompt line names all_reduce_perf
A6000 = DATA / "nvbandwidth" / "a6000x6_d2d_read_ce.txt"


def test_the_collective_named_on_the_prompt_line_is_the_files_line_too() -> None:
    text = diagnose_files([RTX5090]).render_text()
    assert "nccl-tests: all_reduce: 4 rank(s), 25 size(s), max busbw 27.28 GB/s" in text
    assert "collective not named" not in text


def test_two_logs_in_one_paste_name_each_kind_once(tmp_path: Path) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text(RTX5090.read_text() + "user@GENOA-01:~$ ./nvbandwidth -t device_to_device_memcpy_read_ce\n"
                     + A6000.read_text())
    line = next(x for x in diagnose_files([paste]).render_text().splitlines() if x.startswith("  [ok ]"))
    assert line.startswith(f"  [ok ] {paste}: nccl-tests: all_reduce: 4 rank(s)"), line
    assert "nccl-tests: nccl-tests" not in line and "; nvbandwidth: " in line
