"""Messages for bad input on the command line (issue 27), each on the real code path."""

from __future__ import annotations

import os
import sys

import pytest

from gpunode import tasks
from tests.conftest import run_cli


@pytest.mark.parametrize("argv, said", [
    (("provision", "-H", "192.0.2.1", "-f", "x"), "--forks 'x' is not a whole number"),
    (("provision", "-H", "192.0.2.1", "--forks=ten"), "--forks 'ten' is not a whole number"),
    (("lab-up", "--hosts", "x"), "--hosts 'x' is not a whole number"),
    (("lab-up", "-f", "x"), "this task has no -f/--forks"),
])
def test_a_word_for_a_number_names_the_option(argv, said):
    result = run_cli(*argv)
    assert result.code == 2, result.output
    assert said in result.stderr and "invalid literal" not in result.stderr and "internal error" not in result.stderr


def test_an_unclosed_ini_section_header_is_said_as_such(tmp_path):
    inventory = tmp_path / "hosts"
    inventory.write_text("[gpu\ngpu1 ansible_host=192.0.2.1\n")
    result = run_cli("inventory", "-i", str(inventory), "--list")
    assert result.code == 2, result.output
    assert f"{inventory}:1: section header '[gpu' has no closing ']'" in result.stderr
    assert "fix: write [gpu]" in result.stderr and "range" not in result.stderr


@pytest.mark.parametrize("command", ["lab-down", "lab-up"])
def test_the_lab_commands_say_they_need_root(command, monkeypatch, capsys):
    """As a user other than root (euid faked here: this machine's Python lives under /root, which no other user
    may read), the lab commands say so instead of "internal error: PermissionError"."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sys, "argv", ["gpunode", command, "--tag", "t27n"])
    with pytest.raises(SystemExit) as exit_:
        tasks.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and f"{command} needs root" in err and "fix: run it as root" in err, err
    assert "internal error" not in err


def test_verify_gpu_text_cuts_evidence_at_a_word_and_says_so(capsys):
    """verify-gpu's text output (the real printer of its reports) used to cut evidence at 200 characters mid-word."""
    from gpunode.commands.verify_cmd import _print_reports

    evidence = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus. " * 5 + "\nsecond line"
    report = {"host": "gpu-1", "healthy": False, "gpus": [], "findings": [
        {"severity": "critical", "id": "xid-79", "summary": "GPU fell off the bus", "evidence": evidence,
         "remedy": "reseat"}]}
    _print_reports([report])
    out = " ".join(capsys.readouterr().out.split())
    shown = out.split("evidence: ", 1)[1].split(" ... [cut:", 1)[0]
    assert evidence.startswith(shown) and evidence[len(shown)] in " ,", shown  # ends at a word
    assert len(shown) <= 200 and "[cut:" in out and "1 more line; all of it in --json]" in out


@pytest.mark.parametrize("argv, said", [
    (("nfs-volume",), "nfs-volume needs --server, --export"),
    (("nfs-volume", "--server", "nas", "--export", "/e", "--name", "d", "--vendor", "x"),
     "see `gpunode nfs-volume --help`"),
    (("playbooks", "--show", "nosuch"), "--show: unknown built-in playbook 'nosuch'"),
])
def test_a_refusal_names_the_task_and_option_it_came_from(argv, said):
    """Trial of issue 29: `gpunode nfs-volume` said 'mount-nfs needs --server' with a mount-nfs example, and
    `playbooks --show nosuch` named --playbook."""
    result = run_cli(*argv)
    assert result.code == 2, result.output
    assert said in " ".join(result.stderr.split()) and "mount-nfs" not in result.stderr


@pytest.mark.parametrize("task, name", [("verify-gpu", "TARGET"), ("cache", "ACTION")])
def test_a_missing_positional_argument_shows_the_task_command_line(task, name):
    """Trial of issue 29: `gpunode verify-gpu` alone answered with a generic 'see gpunode --help'."""
    result = run_cli(task)
    assert result.code == 2, result.output
    assert f"`gpunode {task} {name} [options]`" in result.stderr
