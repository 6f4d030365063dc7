"""--expect-model against the GPU a benchmark output names: a disagreement is said, never silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.parsers.expect_model import disagree
from gpunode.parsers.nccl_findings import nccl_findings
from gpunode.parsers.nccl_tests import parse_nccl_tests
from gpunode.parsers.nvbandwidth import parse_nvbandwidth
from gpunode.parsers.nvbandwidth_findings import nvbandwidth_findings
from gpunode.verify.diagnose import diagnose_files
from gpunode.verify.evidence import Expectations

DATA = Path(__file__).parent / "data"
A100_H2D = DATA / "nvbandwidth" / "a100_sxm4_h2d_sm.txt"  # "Device 0: NVIDIA A100-SXM4-40GB (00000000:99:00)"
H100_NCCL = DATA / "nccl" / "a3mega_2x8_h100_allreduce.txt"  # rank lines: "NVIDIA H100 80GB HBM3"
RTX4090 = DATA / "nvbandwidth" / "rtx4090x8_v0.2_excerpt.txt"  # a GPU gpunode has no catalogue entry for


@pytest.mark.parametrize(("named", "expected", "differ"), [
    ("NVIDIA A100-SXM4-40GB", "H100", True),
    ("NVIDIA A100-SXM4-40GB", "A100", False),  # the family holds it
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb", False),
    ("NVIDIA A100-SXM4-40GB", "A100 80GB PCIe", True),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", False),  # an alias of the same part
    ("NVIDIA H100 80GB HBM3", "Z9000", True),  # a name that is no catalogued model at all
    ("NVIDIA GeForce RTX 4090", "H100", False),  # uncatalogued output: the user's word picks the reference
    (None, "H100", False),
    ("NVIDIA H100 80GB HBM3", None, False),
])
def test_disagree(named: str | None, expected: str | None, differ: bool) -> None:
    assert disagree(named, expected) is differ


def test_nvbandwidth_output_of_another_model_is_flagged() -> None:
    run = parse_nvbandwidth(A100_H2D.read_text())
    assert run.models == ["NVIDIA A100-SXM4-40GB"]
    flagged = [f for f in nvbandwidth_findings(run, expect_model="H100") if f.id == "nvbandwidth-model-mismatch"]
    assert len(flagged) == 1 and "NVIDIA A100-SXM4-40GB" in flagged[0].summary and "H100" in flagged[0].summary
    assert not [f for f in nvbandwidth_findings(run, expect_model="A100") if f.id.endswith("model-mismatch")]
    uncatalogued = parse_nvbandwidth(RTX4090.read_text())
    assert not [f for f in nvbandwidth_findings(uncatalogued, "H100") if f.id.endswith("model-mismatch")]


def test_nccl_output_of_another_model_is_flagged_in_diagnose() -> None:
    run = parse_nccl_tests(H100_NCCL.read_text())
    assert [f.id for f in nccl_findings(run, "A100") if f.id.endswith("mismatch")] == ["nccl-model-mismatch"]
    result = diagnose_files([H100_NCCL], Expectations(expect_model="A100"))
    assert "nccl-model-mismatch" in [f.id for f in result.findings]
    assert "nccl-model-mismatch" not in [f.id for f in diagnose_files([H100_NCCL]).findings]
