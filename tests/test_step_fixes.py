"""Trial of issues 26-28: a step whose command needs a program the host lacks (`sh: 1: gpg: not found`) got the
action's own fix (the container toolkit's "check that the host reaches NVIDIA's repository"); the shell's words
now give the fix: which program is missing and how to get it."""

from __future__ import annotations

import pytest

from gpunode.connection import ExecResult
from gpunode.steps.base import Action, missing_program_fix
from gpunode.steps.fixes import action_fix


@pytest.mark.parametrize(("output", "names"), [
    ("sh: 1: gpg: not found\nsh: 1: curl: not found\n", "gpg, curl"),        # dash (Debian, Ubuntu's sh)
    ("bash: line 1: jq: command not found\n", "jq"),
    ("bash: jq: command not found\n", "jq"),
    ("/bin/sh: 1: nvidia-ctk: not found\n", "nvidia-ctk"),
])
def test_the_missing_program_is_named(output, names):
    assert f"the host has no {names}:" in missing_program_fix(output)


@pytest.mark.parametrize("output", ["E: Unable to locate package nvidia-foo\n", "grep: /x: No such file or directory\n",
                                    "Error: Package not found\n", ""])
def test_other_failures_keep_their_own_fix(output):
    assert missing_program_fix(output) == ""
    action = Action("add the key", command="curl ... | gpg ...", fix="check that the host reaches the repository")
    assert action_fix(action, ExecResult(2, "", output, 0.1)) == "check that the host reaches the repository"


def test_a_missing_program_comes_before_the_actions_own_fix():
    action = Action("add the key", command="curl ... | gpg ...", fix="check that the host reaches the repository")
    fix = action_fix(action, ExecResult(127, "", "sh: 1: gpg: not found\nsh: 1: curl: not found\n", 0.1))
    assert fix.startswith("the host has no gpg, curl") and "reaches the repository" not in fix


def test_a_missing_nvidia_smi_points_at_the_driver_not_the_base_playbook():
    """dash's words on a lab host without the driver (a gate `nvidia-smi -L`, run here on tr-h1):
    `sh: 1: nvidia-smi: not found`, exit 127. The base playbook installs no nvidia-smi; the driver step does."""
    fix = missing_program_fix("sh: 1: nvidia-smi: not found\n")
    assert fix.startswith("the host has no nvidia-smi: the NVIDIA driver is not installed")
    assert "gpu-node" in fix and "nvidia_driver" in fix and "`base`" not in fix
    assert "`base` playbook" in missing_program_fix("sh: 1: jq: not found\n")
