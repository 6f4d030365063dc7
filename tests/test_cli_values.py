"""An option given without its value is refused before anything runs (found by a new user: `provision --var` and
`--tags` last on the line were dropped by Invoke, and the whole playbook ran for real)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("args, flag", [
    (("--var",), "--var"), (("--tags",), "--tags"), (("--skip-tags",), "--skip-tags"),
    (("--playbook",), "--playbook"), (("-f",), "--forks"), (("--var", "--check"), "--var"),
])
def test_a_value_option_without_a_value_is_a_usage_error(args, flag):
    result = run_cli("provision", "-H", "192.0.2.1", *args)
    assert result.code == 2 and f"{flag} needs a value" in result.stderr, result.output
    assert "192.0.2.1" not in result.stdout  # nothing was attempted


def test_a_tag_list_without_a_tag_is_refused():
    result = run_cli("provision", "-H", "192.0.2.1", "--tags", ",", "--check")
    assert result.code == 2 and "no tag in ','" in result.stderr


def test_negative_numbers_are_values_not_flags():
    result = run_cli("provision", "-H", "192.0.2.1", "-f", "-1")
    assert result.code == 2 and "needs a value" not in result.stderr and "--forks" in result.stderr
