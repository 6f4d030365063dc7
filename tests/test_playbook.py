"""Playbooks are validated before anything runs; errors name file and line."""

from __future__ import annotations

import pytest

from gpunode.errors import UsageError
from gpunode.playbook import evaluate, load_playbook, render
from tests.conftest import REPO, run_cli


def write(tmp_path, text):
    path = tmp_path / "p.yml"
    path.write_text(text)
    return path


def test_base_playbook_is_valid():
    book = load_playbook(REPO / "playbooks/base.yml")
    assert [s.kind for s in book.steps][:2] == ["wait_for_package_manager", "packages"]
    assert "restart journald" in book.handlers


@pytest.mark.parametrize(("text", "line", "message"), [
    ("steps:\n  - name: x\n    pakages: {names: [jq]}\n", 3, "unknown step 'pakages'"),
    ("steps:\n  - packages:\n      names: [jq]\n      state: gone\n", 4, "must be one of"),
    ("steps:\n  - service: {name: x}\n    notify: nope\n", 2, "no handler named 'nope'"),
    ("steps:\n  - file:\n      path: /x\n      colour: blue\n", 4, "unknown argument"),
    ("steps:\n  - file:\n      path: \"{{ p }}\"\n      backup: perhaps\n", 4, "must be true or false"),
    ("steps: [\n", 2, "malformed YAML"),
    ("stepz: []\n", 1, "unknown playbook key"),
    ("hosts: all\nbecome: yes\nsteps: []\n", 2, "Ansible's play key 'become'"),
    ("- hosts: all\n  tasks: []\n", 2, "Ansible's play key 'tasks'"),
])
def test_errors_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_playbook(path)
    assert f"{path}:{line}:" in str(caught.value)
    assert message in str(caught.value)


def test_bad_playbook_exits_2_and_runs_nothing(tmp_path):
    path = write(tmp_path, "steps:\n  - nonsense: {}\n")
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(path))
    assert result.code == 2
    assert f"{path}:2:" in result.stderr and "unknown step" in result.stderr


def test_templates_keep_native_types_and_fail_on_undefined():
    variables = {"pkgs": ["a", "b"], "n": 3, "name": "x"}
    assert render("{{ pkgs }}", variables) == ["a", "b"]
    assert render("v{{ n }}", variables) == "v3"
    assert render({"k": ["{{ name }}-1"]}, variables) == {"k": ["x-1"]}
    assert evaluate("n > 2 and name == 'x'", variables) is True
    with pytest.raises(ValueError, match="undefined"):
        render("{{ missing }}", variables)


def test_a_wrong_kind_of_value_is_named_in_yaml_words_not_python_types(tmp_path):
    book = tmp_path / "p.yml"
    book.write_text("name: p\nsteps:\n  - file: {path: [/etc/a, /etc/b], content: x}\n"
                    "  - packages: {names: {jq: 1}}\n")
    with pytest.raises(UsageError) as refused:
        load_playbook(book)
    text = str(refused.value)
    assert "file.path must be a string, got a list" in text
    assert "LineList" not in text and "LineDict" not in text
