"""The probe protocol (gpunode/steps/probe.py): the built script run for real by sh and bash, its output split once."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpunode.connection import q
from gpunode.errors import GpunodeError
from gpunode.steps.probe import ProbeBatch, ProbeOutput, ProbeSectionNotAsked, nested
from tests.plan_cases import all_cases, run_case

SHELLS = [s for s in ("sh", "bash", "dash") if shutil.which(s)]


def run(batch: ProbeBatch, shell: str) -> subprocess.CompletedProcess[str]:
    """The script the way the runner sends it: `SHELL -s` with the script on stdin."""
    return subprocess.run([shell, "-s"], input=batch.script(), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("shell", SHELLS)
def test_each_section_comes_back_exactly_as_printed(shell):
    tricky = "@@probe-0123456789abcdef 0 b\n@@dkms\n@@lists\n@@\n@@probe- end\n"  # marker-like text, wrong nonce
    probes = [
        {"a": "printf 'no final newline'", "b": f"printf %s {q(tricky)}", "c": "echo two; echo lines"},
        {"empty": "", "blank": "   \n", "silent": "true", "fails": "echo before; exit 3; echo after"},
        {"stderr": "echo out; echo err >&2", "killed": "echo dying; exec sh -c 'kill -9 $$'",
         "stdin": "cat; echo read-nothing"},
        {"only": "printf '\\n\\n'"},
    ]
    batch = ProbeBatch(probes)
    result = run(batch, shell)
    assert result.returncode == 0, result.stderr
    assert "err" not in result.stderr  # every section's stderr is merged into its own output (the shell itself
    # may say "Killed" about the section killed below)
    first, second, third, fourth = batch.split(result.stdout)
    assert first == {"a": "no final newline", "b": tricky, "c": "two\nlines\n"}
    assert second == {"empty": "", "blank": "", "silent": "", "fails": "before\n"}  # a failing snippet: no abort
    assert third == {"stderr": "out\nerr\n", "killed": "dying\n", "stdin": "read-nothing\n"}  # stdin is /dev/null
    assert fourth == {"only": "\n\n"}
    assert second["empty"] == "" and first.sections_asked == {"a", "b", "c"}  # what the probe asked for
    with pytest.raises(ProbeSectionNotAsked, match="'never-probed' it did not ask for"):  # never asked: a bug
        first["never-probed"]


def test_the_output_of_another_run_cannot_be_mistaken_for_this_one():
    """A section that prints a whole earlier run's output (an old log, say) splits as its own text."""
    old = ProbeBatch([{"x": "echo old"}])
    old_out = run(old, "sh").stdout
    batch = ProbeBatch([{"x": f"printf %s {q(old_out)}", "y": "echo new"}])
    assert batch.nonce != old.nonce
    (output,) = batch.split(run(batch, "sh").stdout)
    assert output == {"x": old_out, "y": "new\n"}


def test_output_cut_off_before_the_end_marker_is_an_error_not_empty_sections():
    batch = ProbeBatch([{"a": "echo a"}, {"b": "echo b"}])
    stdout = run(batch, "sh").stdout
    cut = stdout[: stdout.index("\nb\n")]
    with pytest.raises(GpunodeError, match="ended early") as info:
        batch.split(cut)
    assert info.value.step == "probe" and info.value.fix
    assert ProbeBatch([]).split("") == []


def test_a_section_name_that_could_break_the_marker_line_is_refused():
    for name in ("two words", "new\nline", "", "quote'"):
        with pytest.raises(ValueError, match="probe section name"):
            ProbeBatch([{name: "true"}])


def test_nested_snippets_are_read_back_within_their_prefix():
    snippets = {"own": "echo mine", **nested("pkgs", {"installed": "echo jq", "lists": "echo 9"})}
    assert list(snippets) == ["own", "pkgs.installed", "pkgs.lists"]
    batch = ProbeBatch([snippets])
    (output,) = batch.split(run(batch, "sh").stdout)
    assert output.within("pkgs") == {"installed": "jq\n", "lists": "9\n"}
    assert isinstance(output.within("pkgs"), ProbeOutput) and output.within("pkgs").sections_asked == {"installed",
                                                                                                        "lists"}
    with pytest.raises(ProbeSectionNotAsked, match="'none.installed' it did not ask for"):
        output.within("none")["installed"]


def test_every_probe_of_the_plan_cases_builds_one_valid_script():
    """All steps' probes of tests/plans in one batch: `sh -n` (dash) parses it (scripts elided as a quoted word)."""
    probes = [probe for probe in (run_case(case)["probe"] for case in all_cases()) if probe]
    assert len(probes) > 30
    batch = ProbeBatch([{name: s.replace("<scripts/", "'scripts/").replace(".sh>", ".sh'") for name, s in p.items()}
                        for p in probes])
    result = subprocess.run(["sh", "-n"], input=batch.script(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
