"""Ansible's `-e/--extra-vars` forms, `--diff`, and extra variables checked against the playbook's declared defaults
before any host is contacted (issue 27: `-e k=v` was Invoke's --echo; `--var install_docker=maybe` was accepted and
`flase` counted as true)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.app.variables import as_var_pairs, parse_extra_vars
from gpunode.errors import UsageError
from gpunode.playbook import load_playbook
from gpunode.playbook.vartypes import check_var_types
from tests.conftest import run_cli

GPU_NODE = Path(__file__).resolve().parents[1] / "gpunode" / "_playbooks" / "gpu-node.yml"


def declared_at(name: str) -> int:
    """The line of gpu-node.yml that declares `name` (the playbook grows; the tests should not count lines)."""
    return next(n for n, line in enumerate(GPU_NODE.read_text().splitlines(), 1) if line.startswith(f"  {name}:"))


UNREACHABLE = "192.0.2.1"  # TEST-NET-1: a run that got as far as connecting would fail with exit 1, not 2


def test_key_value_pairs_several_in_one_argument_typed_like_var():
    assert parse_extra_vars(["driver_branch=550 install_docker=false", "note='two words'"]) == {
        "driver_branch": 550, "install_docker": False, "note": "two words"}


def test_inline_json_and_yaml_and_a_later_value_wins():
    assert parse_extra_vars(['{"driver_branch": 550, "tags": ["a"]}', "{driver_branch: 570}"]) == {
        "driver_branch": 570, "tags": ["a"]}


@pytest.mark.parametrize("suffix, text", [(".yml", "driver_branch: 550\nnames: [a, b]\n"),
                                          (".json", '{"driver_branch": 550, "names": ["a", "b"]}')])
def test_at_file_reads_yaml_or_json(tmp_path, suffix, text):
    path = tmp_path / f"vars{suffix}"
    path.write_text(text)
    assert parse_extra_vars([f"@{path}"]) == {"driver_branch": 550, "names": ["a", "b"]}


@pytest.mark.parametrize("item, expected", [
    ("@/nonexistent/vars.yml", "cannot read the file"), ("[1, 2]", "must be a mapping"),
    ("{a: [}", "not valid YAML or JSON"), ("novalue", "is not KEY=VALUE"), ("'unclosed", "No closing quotation"),
])
def test_bad_extra_vars_are_usage_errors_with_the_fix(item, expected):
    with pytest.raises(UsageError) as error:
        parse_extra_vars([item])
    assert expected in error.value.cause and "-e @vars.yml" in error.value.fix


def test_var_pairs_read_back_to_the_same_values():
    from gpunode.app.variables import parse_vars

    values = {"a": "550", "b": 550, "c": False, "d": ["x y", 1], "e": "yes", "f": None}
    assert parse_vars(as_var_pairs(values)) == values


@pytest.mark.parametrize("value", ["maybe", "flase", "", 2, "[1]"])
def test_a_bool_variable_refuses_what_is_not_true_or_false(value):
    book = load_playbook("gpu-node")
    with pytest.raises(UsageError) as error:
        check_var_types(book, {"install_container_toolkit": value})
    assert error.value.source.endswith("gpu-node.yml") and error.value.line == declared_at("install_container_toolkit")
    assert "install_container_toolkit=true or install_container_toolkit=false" in error.value.fix


@pytest.mark.parametrize("value", [True, False, "yes", "off", "0", "True", 1])
def test_a_bool_variable_takes_the_words_ansible_reads(value):
    check_var_types(load_playbook("gpu-node"), {"install_container_toolkit": value})


def test_a_number_variable_refuses_words_and_an_undeclared_one_is_free():
    book = load_playbook("gpu-node")
    with pytest.raises(UsageError, match="driver_branch='abc' is not a number"):
        check_var_types(book, {"driver_branch": "abc"})
    check_var_types(book, {"driver_branch": "550", "my_own": "anything", "container_toolkit_version": "1.17.8-1"})


def test_a_variable_declared_by_an_include_is_found_where_it_is_declared(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text("name: site\nsteps:\n  - include: gpu-node\n    vars:\n      install_container_toolkit: false\n"
                    "  - command: {cmd: 'true'}\n")
    with pytest.raises(UsageError) as error:
        check_var_types(load_playbook(site), {"install_container_toolkit": "maybe"})
    assert (error.value.source, error.value.line) == (str(site), 5)
    with pytest.raises(UsageError) as error:
        check_var_types(load_playbook(site), {"driver_branch": "x"})
    assert error.value.source.endswith("gpu-node.yml") and error.value.line == declared_at("driver_branch")


@pytest.mark.parametrize("args", [("--var", "install_container_toolkit=maybe"),
                                  ("-e", "install_container_toolkit=flase"),
                                  ("--extra-vars", '{"install_container_toolkit": "maybe"}')])
def test_provision_refuses_a_mistyped_variable_before_connecting(args):
    result = run_cli("provision", "-H", UNREACHABLE, "--playbook", "gpu-node", *args)
    assert result.code == 2, result.output
    assert f"gpu-node.yml:{declared_at('install_container_toolkit')}:" in result.stderr
    assert "is not true or false" in result.stderr
    assert "fix: give install_container_toolkit=true or install_container_toolkit=false" in result.stderr
    assert UNREACHABLE not in result.stdout


def test_e_is_extra_vars_not_invokes_echo_and_reaches_the_playbook(tmp_path):
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({"greeting": "from a file"}))
    book = tmp_path / "book.yml"
    book.write_text("name: t\nsteps:\n  - file: {path: \"{{ target }}\", content: \"{{ greeting }} {{ n }}\\n\"}\n")
    target = tmp_path / "out.txt"
    result = run_cli("provision", "-H", "localhost", "--playbook", str(book), "-e", f"@{vars_file}",
                     "-e", f"target={target} n=1", "--extra-vars", '{"n": 2}', "--log-dir", str(tmp_path / "logs"))
    assert result.code == 0, result.output
    assert target.read_text() == "from a file 2\n"


def test_diff_shows_what_a_real_run_changed(tmp_path):
    book = tmp_path / "book.yml"
    target = tmp_path / "motd"
    target.write_text("old\n")
    book.write_text(f"name: t\nsteps:\n  - name: motd\n    file: {{path: {target}, content: \"new\\n\"}}\n")
    plain = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--log-dir", str(tmp_path / "l1"))
    assert plain.code == 0 and "+new" not in plain.stdout, plain.output
    target.write_text("old\n")
    result = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--diff", "--log-dir",
                     str(tmp_path / "l2"))
    assert result.code == 0, result.output
    assert "motd" in result.stdout and "changed:" in result.stdout and "-old" in result.stdout
    assert "+new" in result.stdout


def test_user_data_takes_e_and_defaults_to_the_built_in_base_outside_a_checkout(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "ud.sh"
    result = subprocess.run([sys.executable, "-m", "gpunode", "user-data", "-e", "journald_max_use=512M",
                             "--output", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "playbook base" in text and "--var 'journald_max_use=\"512M\"'" in text


def test_mig_config_from_extra_vars_refused_naming_the_variable_and_yes_read_as_true():
    """Trial of issue 29: a bad `mig_config` entry given with -e was refused pointing at docs/steps.md rather than at
    the variable (its ValueError named no argument), counted entries from 1 where the type check counts from 0,
    and `"mig-enabled": "yes"` in JSON was refused where every other boolean takes Ansible's words."""
    bad = run_cli("provision", "-H", UNREACHABLE, "--playbook", "gpu-node", "--check",
                  "-e", '{"mig_config": [{"devices": "all", "mig-enabled": true, "oops": 1}]}')
    assert bad.code == 2, bad.stderr
    said = " ".join(bad.stderr.split())
    assert "nvidia_mig.config[0]: unknown key(s) oops" in said
    assert "the value comes from the variable mig_config" in said
    assert "give mig_config a valid value" in said
    from gpunode.steps.base import build_step
    step = build_step("nvidia_mig", {"config": [{"devices": "all", "mig-enabled": "yes",
                                                  "mig-devices": {"1g.10gb": 7}}]})
    assert step.config[0]["mig-enabled"] == "yes"  # kept as given; read as true when planned
    with pytest.raises(ValueError, match=r"config\[0\]: mig-enabled must be true or false"):
        build_step("nvidia_mig", {"config": [{"devices": "all", "mig-enabled": "maybe"}]})
