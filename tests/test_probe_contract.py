"""A step's probe contract (gpunode/steps/probe.py, issue 41): a section the step asked for that printed nothing
reads as ""; a section it never asked for (a typo, a read its own conditions never asked for) is a bug in the step,
named with the step's kind and the section: in a plan case, and on a host (an internal error, not a host failure
with a fix to follow)."""

from __future__ import annotations

import pytest

from gpunode.steps.files import FileStep
from gpunode.steps.probe import ProbeBatch, ProbeOutput, ProbeSectionNotAsked, nested
from tests.plan_cases import CASES_DIR, load_cases, run_case
from tests.run_cases import run_case as run_on_standin


@pytest.fixture(autouse=True)
def _own_facts_cache(tmp_path, monkeypatch):
    """The facts cache (runner/facts_cache.py) in the test's own folder, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_a_section_asked_for_that_printed_nothing_reads_as_empty():
    output = ProbeOutput({"dkms": "nvidia/535: installed\n"}, asked={"dkms", "held"}, step="nvidia_driver")
    assert output["held"] == "" and output["dkms"] == "nvidia/535: installed\n"
    assert output.asked("held") and not output.asked("precompiled")
    batch = ProbeBatch([{"silent": "true"}])  # as the runner splits it: asked, printed nothing
    (split,) = batch.split(f"\n@@probe-{batch.nonce} 0 silent\n\n@@probe-{batch.nonce} end\n", ["command"])
    assert split["silent"] == "" and split.step == "command"


def test_a_typo_names_the_step_kind_and_the_section():
    output = ProbeOutput({"precompiled": "x\n"}, asked={"dkms", "precompiled"}, step="nvidia_driver")
    with pytest.raises(ProbeSectionNotAsked) as info:
        output["precompild"]
    assert str(info.value) == ("nvidia_driver read probe section 'precompild' it did not ask for "
                               "(its probe() returns: dkms, precompiled)")
    assert not isinstance(info.value, KeyError)  # no `except KeyError` in a step hides the bug


def test_a_typo_within_a_nested_section_is_named_in_full():
    output = ProbeOutput(asked=nested("pkgs", {"installed": "dpkg-query ..."}), step="docker")
    assert output.within("pkgs")["installed"] == ""
    with pytest.raises(ProbeSectionNotAsked, match=r"docker read probe section 'pkgs\.instaled' .*pkgs\.installed\)"):
        output.within("pkgs")["instaled"]


def test_a_typo_in_a_step_fails_its_plan_case(monkeypatch):
    """A plan case's probe asks what the step's probe() asks on the case's facts: the case may leave out a section
    that printed nothing, but the step cannot read one it did not ask for."""
    case = next(c for c in load_cases(CASES_DIR / "file.yaml") if c.get("probe"))
    run_case(case)  # as the step is: fine
    monkeypatch.setattr(FileStep, "plan", lambda self, ctx: ctx.probe["fiel"])
    with pytest.raises(ProbeSectionNotAsked, match=r"^file read probe section 'fiel' it did not ask for \(its probe"
                                                   r"\(\) returns: file\)$"):
        run_case(case)


def test_a_typo_in_a_step_is_reported_on_the_host_as_a_bug(monkeypatch, tmp_path):
    """On a host the runner reports it as every step bug: an internal error that names the step and the section."""
    monkeypatch.setattr(FileStep, "plan", lambda self, ctx: ctx.probe["fiel"])
    case = {"name": "typo", "playbook": "steps:\n  - name: conf\n    file: {path: /etc/x.conf, content: \"x\\n\"}\n",
            "replies": [{"probe": "file", "stdout": "absent\n"}]}
    outcome, _ = run_on_standin(case, tmp_path)
    assert outcome.status == "failed"
    assert "internal error: ProbeSectionNotAsked: file read probe section 'fiel' it did not ask for" in outcome.error
    assert "please report this" in outcome.fix
