""""Is this normal for this machine?": judge a pasted benchmark with what the user says it came from
(--expect-model / --expect-gpus) when the capture does not name its GPUs, and say what is missing when nothing does.
"""

from __future__ import annotations

from dataclasses import replace

from gpunode.parsers.model import Finding
from gpunode.parsers.nccl_findings import nccl_findings
from gpunode.parsers.nccl_tests import NcclRun, parse_nccl_tests
from gpunode.verify.evidence import Expectations

_ASK = "--expect-model MODEL (e.g. A100, H100, H200) and --expect-gpus N"


def _expected_run(run: NcclRun, expectations: Expectations) -> NcclRun | None:
    """The run with the GPUs the user named, when its output lists no rank lines (``-g``-less excerpts, tables
    pasted without their header) and the user said how many GPUs of which model it ran on."""
    if run.ranks or not expectations.expect_model or not expectations.expect_gpus:
        return None
    model = expectations.expect_model
    return replace(run, ranks=[(rank, "?", rank, model) for rank in range(expectations.expect_gpus)])


def rejudge_nccl(findings: list[Finding], nccl_text: str | None, expectations: Expectations) -> list[Finding]:
    """findings with the nccl-tests verdict made for the GPUs the user named, when the run itself names none."""
    if not nccl_text:
        return findings
    run = _expected_run(parse_nccl_tests(nccl_text), expectations)
    if run is None:
        return findings
    judged = [Finding(f.id, f.severity, f.summary + " (GPUs as given by --expect-model/--expect-gpus: the "
                      "output has no rank lines)", f.evidence, f.remedy, f.gpu)
              for f in nccl_findings(run, expectations.expect_model)]
    ids = {f.id for f in judged} | {"nccl-no-reference"}
    return [f for f in findings if f.id not in ids] + judged


def without_moot(findings: list[Finding]) -> list[Finding]:
    """findings without "no reference" for an nccl-tests run that stopped before measuring anything."""
    if any(f.id == "nccl-tests-failed" for f in findings):
        return [f for f in findings if f.id != "nccl-no-reference"]
    return findings


def nccl_missing(nccl_text: str | None, expectations: Expectations) -> str:
    """What an nccl-tests run without a verdict lacks: the GPU model/count when the output names none, else a
    published reference for what it names."""
    run = parse_nccl_tests(nccl_text or "")
    if not run.models and not expectations.expect_model:
        return (f"the GPUs this nccl-tests run came from: its output names no GPU (no '# Rank' lines); give {_ASK} "
                "to judge it against that model's reference")
    if not run.ranks and not expectations.expect_gpus:
        return "how many GPUs this nccl-tests run used (no '# Rank' lines): give --expect-gpus N with --expect-model"
    return ("a published bandwidth reference for this nccl-tests run (collective, model and GPU count): no verdict "
            "on its bandwidth")


def floor_missing(program: str, finding: Finding, expectations: Expectations) -> str:
    """What a copy-bandwidth run (nvbandwidth, bandwidthTest, dcgmi diag PCIe) whose no-reference finding is
    `finding` lacks: the model when neither the output nor the user names it, else a floor for that model."""
    if "unnamed model" in finding.summary and not expectations.expect_model:
        return (f"the GPU model this {program} run came from: the output names none; give --expect-model MODEL "
                "(A100, H100, H200 and V100 have floors) to judge it")
    return (f"a published floor for the GPU of this {program} run (floors exist for A100, H100, H200, V100; "
            f"{finding.summary.split(': ')[0]}): no verdict on its bandwidth")
