"""Flags given a word: `--container-test` is a real flag with an "off" form, `--container-test false` does not run
the test (issue 27: it needed a value, and `false` ran the test); a word after another flag is refused."""

from __future__ import annotations

import sys

import pytest

from gpunode import tasks
from tests.conftest import run_cli


def verify_options(monkeypatch, *argv: str):
    """The VerifyOptions that `gpunode verify-gpu HOST ARGV...` hands to the command (nothing is contacted)."""
    import gpunode.commands.verify_cmd as verify_cmd

    seen = []
    monkeypatch.setattr(verify_cmd, "verify_gpu", lambda inventory, target, options, *rest: seen.append(options) or 0)
    monkeypatch.setattr(sys, "argv", ["gpunode", "verify-gpu", "192.0.2.1", *argv])
    tasks.main()
    return seen[0]


@pytest.mark.parametrize("argv, expected", [
    ((), None), (("--container-test",), True), (("--no-container-test",), False),
    (("--container-test", "false"), False), (("--container-test=no",), False), (("--container-test", "yes"), True),
    (("--container-test", "--json"), True),
])
def test_container_test_is_a_flag_with_an_off_form(monkeypatch, argv, expected):
    assert verify_options(monkeypatch, *argv).container_test is expected


def test_both_container_test_flags_are_refused():
    result = run_cli("verify-gpu", "192.0.2.1", "--container-test", "--no-container-test")
    assert result.code == 2 and "contradict" in result.stderr, result.output


@pytest.mark.parametrize("argv, fix", [
    (("provision", "-H", "192.0.2.1", "--check", "false"), "leave --check out"),
    (("provision", "-H", "192.0.2.1", "-C=yes"), "give --check to turn it on"),
    (("facts", "--json", "no"), "leave --json out"),  # "no" would have become the host name
])
def test_a_word_after_another_flag_is_refused_with_the_fix(argv, fix):
    result = run_cli(*argv)
    assert result.code == 2 and "is a flag and takes no value" in result.stderr and fix in result.stderr, result.output
