"""Every task's help is the same whichever way it is asked for, and lists every option with its text (issue 27: the
texts were consumed before help printed; `--help` was taken as a host name or failed "needs --server")."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from invoke import Program
from invoke.loader import FilesystemLoader

from gpunode import tasks
from tests.conftest import REPO, run_cli

TASKS = sorted(tasks.ns.task_names)


def gpunode_output(monkeypatch, capsys, *argv: str) -> str:
    """The console script's output for argv, run in this process as `gpunode` runs it."""
    monkeypatch.setattr(sys, "argv", ["gpunode", *argv])
    with pytest.raises(SystemExit) as exit_:
        tasks.main()
        sys.exit(0)
    out, err = capsys.readouterr()
    assert exit_.value.code in (0, None), err
    return out


def invoke_output(monkeypatch, capsys, *argv: str) -> str:
    """`invoke ...` from the checkout (tasks.py), run in this process as the `invoke` program runs it."""
    monkeypatch.chdir(REPO)
    program = Program(loader_class=FilesystemLoader, binary="inv[oke]")
    program.run(["invoke", *argv], exit=False)
    return capsys.readouterr().out.replace("Usage: inv[oke] ", "Usage: gpunode ")


def options(text: str) -> dict[str, str]:
    """Option spec -> its description, from the help's Options section (wrapped lines joined)."""
    section = text.split("\nOptions:\n", 1)[1]
    found: dict[str, str] = {}
    spec = ""
    for line in section.splitlines():
        match = re.match(r"  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if match:
            spec = match.group(1).strip()
            found[spec] = match.group(2) or ""
        elif line.strip() and spec:
            found[spec] += " " + line.strip()
    return found


@pytest.mark.parametrize("task", TASKS)
def test_the_three_help_forms_agree_and_describe_every_option(task, monkeypatch, capsys):
    core_form = gpunode_output(monkeypatch, capsys, "--help", task)
    task_form = gpunode_output(monkeypatch, capsys, task, "--help")
    invoke_form = invoke_output(monkeypatch, capsys, task, "--help")
    assert core_form.startswith(f"Usage: gpunode [--core-opts] {task} ")
    assert task_form == core_form
    assert invoke_form == core_form
    described = options(core_form)
    arguments = tasks.ns[task].get_arguments()
    assert len(described) == len(arguments), described
    assert all(text.strip() for text in described.values()), described


@pytest.mark.parametrize("argv", [("verify-gpu", "-h"), ("mount-nfs", "host1", "--help"), ("bake", "--help")])
def test_help_after_a_task_is_help_from_the_real_console_script(argv):
    """In a fresh process, as users type it: no connection attempt, no "needs --server"."""
    result = subprocess.run([sys.executable, "-m", "gpunode", *argv], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: gpunode [--core-opts] {argv[0]} ") and "Options:" in result.stdout


def test_invoke_help_for_a_task_with_a_positional_host_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-m", "invoke", "verify-gpu", "--help"], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--container-test" in result.stdout and "UNREACHABLE" not in result.stdout + result.stderr


def test_every_task_the_readme_and_the_guides_name_exists():
    """Trial of issues 26-28: README's Commands table offered `gpunode lab-base-image`, which was defined in
    gpunode/tasks.py but never added to the collection ("No idea what 'lab-base-image' is!"). The task reference is
    generated now (docs/tasks.md); every `gpunode TASK` or `invoke TASK` named in README.md and docs/*.md exists."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    named = {match.group(1) for page in pages
             for match in re.finditer(r"`(?:\.venv/bin/)?(?:gpunode|invoke) ([a-z][a-z0-9-]*)", page.read_text())}
    assert {"lab-base-image", "provision", "lab-up", "verify-gpu"} <= named
    assert named - set(TASKS) == set()


def test_an_option_given_twice_is_named_with_the_fix():
    """New-user trial of seed 000: `--name t1 ... --name bad` said only "No idea what 'bad' is!". An option that takes
    one value, given twice, is named; a stray word keeps Invoke's message."""
    twice = run_cli("gpu-pod", "--cloud", "eci", "--gpus", "1", "--name", "a", "--gpus", "2")
    assert twice.code == 2 and "--gpus is given twice" in twice.stderr and "give --gpus once" in twice.stderr
    stray = run_cli("gpu-pod", "--cloud", "eci", "stray")
    assert stray.code == 2 and "No idea what 'stray' is!" in stray.stderr and "given twice" not in stray.stderr
