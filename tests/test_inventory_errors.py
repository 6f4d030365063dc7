"""Bad inventories fail with a UsageError (exit code 2) naming the file, the line and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import GpunodeError, UsageError
from gpunode.inventory import load_inventory

ERRORS = Path(__file__).parent / "data" / "inventory" / "errors"


def load_error(source: Path | list[Path]) -> UsageError:
    with pytest.raises(UsageError) as info:
        load_inventory(source)
    return info.value


@pytest.mark.parametrize(
    ("name", "line", "words"),
    [
        ("bad_syntax.yml", 7, "malformed YAML"),
        ("hosts_list.yml", 6, "hosts of group 'gpu' must be a mapping"),
        ("host_vars_scalar.yml", 5, "vars of host 'gpu2.example.com' must be a mapping"),
        ("cycle.yml", 10, "cycle: a -> b -> c -> a"),
        ("cycle.ini", 5, "cycle: x -> y -> x"),
        ("bad_port.yml", 6, "host 'gpu2.example.com': ansible_port '22x' is not a port number"),
        ("bad_port.ini", 3, "host 'gpu2.example.com': ansible_port 70000 is not a port number"),
        ("bad_become.yml", 4, "become must be true or false, got 'maybe'"),
        ("empty.yml", 1, "inventory file is empty"),
        ("empty.ini", 1, "inventory file is empty"),
        ("bad_section.ini", 4, "unknown type 'hostz'"),
        ("bad_host_var.ini", 3, "expected key=value after host 'gpu2.example.com'"),
        ("unclosed_quote.ini", 2, "No closing quotation"),
        ("bad_range.yml", 3, "must have begin <= end"),
        ("unknown_key.yml", 4, "unexpected key 'host' in group 'gpu'"),
        ("plugin.yml", 1, "inventory plugin config"),
    ],
)
def test_error_names_file_line_cause_and_fix(name: str, line: int, words: str) -> None:
    error = load_error(ERRORS / name)
    assert isinstance(error, GpunodeError)
    assert error.source == str(ERRORS / name)
    assert error.line == line
    assert f"{name}:{line}: " in str(error)
    assert words in str(error)
    assert error.fix, "every inventory error must say what to do"


def test_bad_group_vars_file_names_that_file() -> None:
    error = load_error(ERRORS / "bad_group_vars")
    assert error.source.endswith("group_vars/gpu.yml")
    assert error.line == 2
    assert "must be a mapping" in error.cause


def test_nothing_is_returned_when_one_source_is_bad() -> None:
    good = Path(__file__).parent / "data" / "inventory" / "basic.ini"
    error = load_error([good, ERRORS / "bad_port.ini"])
    assert error.source.endswith("bad_port.ini")


def test_missing_path() -> None:
    error = load_error(ERRORS / "no-such-inventory.yml")
    assert error.source.endswith("no-such-inventory.yml")
    assert "not found" in error.cause


def test_directory_without_inventory_files(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "notes.md").write_text("# ignored\n")
    error = load_error(tmp_path)
    assert error.source == str(tmp_path)
    assert "no inventory files" in error.cause


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("gpu:\n  hosts:\n    web[1:2:3:4]:\n", 3, "must be begin:end or begin:end:step"),
        ("gpu:\n  hosts:\n    web[01:100]:\n", 3, "equally long"),
        ("gpu:\n  hosts:\n    web[1:3:\n", 3, "unbalanced brackets"),
        ("gpu:\n  hosts: web[1:3\n", 2, "unbalanced brackets"),
        ("gpu:\n  hosts:\n    web1:ssh:\n", 3, "must be a port number"),
        ("gpu:\n  hosts:\n    web1:\u00b2:\n", 3, "must be a port number"),  # "²".isdigit(); found by hypothesis
        ("gpu: [a, b]\n", 1, "group 'gpu' must be a mapping"),
        ("gpu:\n  vars: [a]\n", 2, "vars of group 'gpu' must be a mapping"),
        ("- gpu1\n- gpu2\n", 1, "must be a mapping of group names"),
        ("gpu:\n  children:\n    all:\n", 3, "group 'all' cannot be a child"),
        ("gpu:\n  vars:\n    ansible_group_priority: high\n  hosts:\n    n1:\n", 3, "ansible_group_priority"),
        ("gpu:\n  hosts:\n    n1:\n      ansible_port: true\n", 4, "is not a port number"),
        ("gpu:\n  hosts:\n    n1:\n      ansible_ssh_common_args: -p 0\n", 4, "ssh port option '0'"),
    ],
)
def test_yaml_error_cases(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    error = load_error(path)
    assert (error.source, error.line) == (str(path), line)
    assert words in str(error)
    assert error.fix


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[gpu]\ngpu1\n[gpu:vars]\nno_equals_here\n", 4, "expected key=value in [gpu:vars]"),
        ("[gpu:children]\nbad:name\n", 2, "expected a group name"),
        ("[gpu group]\n", 1, "invalid section header"),
        ("[gpu]\ngpu1:\n", 2, "ends with ':'"),
        ("[gpu]\n2001:db8::1:2:3:4:5:6:7\n", 2, "is not an IPv6 address"),
    ],
)
def test_ini_error_cases(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(text)
    error = load_error(path)
    assert (error.source, error.line) == (str(path), line)
    assert words in str(error)


def test_vault_encrypted_vars_file_is_explained(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[gpu]\ngpu1\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    error = load_error(tmp_path / "hosts.ini")
    assert error.source.endswith("gpu.yml")
    assert "Vault" in error.cause
    assert "ansible-vault decrypt" in error.fix
