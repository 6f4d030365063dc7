"""Issue 27: what a playbook load refuses before any host is contacted (file:line and a fix, exit 2 on the CLI):
Ansible's task keys written wrongly, Jinja syntax errors anywhere, non-UTF-8 files, a bare number for a list, and
templated arguments whose value the controller knows (gpunode/playbook/validate.py)."""

from __future__ import annotations

import pytest

from gpunode.errors import UsageError
from gpunode.inventory import Host
from gpunode.playbook import load_playbook
from gpunode.playbook.validate import check_arguments


def load(tmp_path, text: str | bytes):
    path = tmp_path / "p.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return load_playbook(path)


@pytest.mark.parametrize(("text", "line", "message"), [
    ("steps:\n  - command: {cmd: x}\n    register: 'not a name'\n", 3, "is not a variable name"),
    ("steps:\n  - command: {cmd: x}\n    register: facts\n", 3, "is not a variable name"),
    ("steps:\n  - command: {cmd: x}\n    ignore_errors: maybe\n", 3, "ignore_errors must be true or false"),
    ("steps:\n  - command: {cmd: x}\n    failed_when: {a: 1}\n", 3, "failed_when must be a condition"),
    ("steps:\n  - command: {cmd: x}\n    changed_when: [x ==]\n", 3, "Jinja syntax error in changed_when"),
    ("vars:\n  a: 1\n  b: '{{ a'\nsteps:\n  - command: {cmd: x}\n", 3, "Jinja syntax error in vars: b"),
    ("steps:\n  - name: n\n    line: {path: /x, line: '{% if %}'}\n", 3, "Jinja syntax error in line.line"),
    ("steps:\n  - include: base\n    when: 'a b'\n", 3, "Jinja syntax error in when"),
    ("steps:\n  - packages: {names: 5}\n", 2, "packages.names must be a list, got a number 5"),
    ("steps:\n  - packages: {names: {a: 1}}\n", 2, "packages.names must be a list, got a mapping"),
    (b"steps:\n  - command: {cmd: x}\n  # caf\xe9\n", 3, "not UTF-8 text: byte 0xe9 at column 8"),
    # trial of issues 26-28: an unknown filter or test in a step's template is found when the template is compiled,
    # before any host is contacted (it was a per-host failure after connecting, unlike the same filter in when:)
    ("steps:\n  - name: n\n    command: {cmd: \"echo {{ 'a' | shellquote }}\"}\n", 3, "No filter named 'shellquote'"),
    ("steps:\n  - name: n\n    file: {path: /x, content: '{{ facts.os.id | upcase }}'}\n", 3,
     "No filter named 'upcase'"),
    ("steps:\n  - name: n\n    line: {path: /x, line: '{{ x is versio(\"1\") }}'}\n", 3, "No test named 'versio'"),
    # a misspelt step keyword was "unknown step 'regster'" with the list of step types; Ansible keywords gpunode has
    # no key for were unknown "steps" too
    ("steps:\n  - command: {cmd: x}\n    regster: r\n", 3, "unknown step key 'regster' (did you mean 'register'?)"),
    ("steps:\n  - command: {cmd: x}\n    notfy: h\n", 3, "unknown step key 'notfy' (did you mean 'notify'?)"),
    ("steps:\n  - command: {cmd: x}\n    loop: [a, b]\n", 3, "Ansible's 'loop' is not a gpunode step key"),
    ("steps:\n  - shell: echo hi\n", 2, "Ansible's 'shell' is not a gpunode step key"),
])
def test_refused_at_load_with_file_and_line(tmp_path, text, line, message):
    with pytest.raises(UsageError) as caught:
        load(tmp_path, text)
    assert f"p.yml:{line}: " in str(caught.value) and message in str(caught.value)
    assert caught.value.fix


def test_task_keys_are_read(tmp_path):
    book = load(tmp_path, "steps:\n  - command: {cmd: x}\n    register: r\n    ignore_errors: true\n"
                          "    failed_when: [r.rc > 1, true]\n    changed_when: false\n")
    (step,) = book.steps
    assert (step.register, step.ignore_errors, step.failed_when, step.changed_when) == ("r", True,
                                                                                          ["r.rc > 1", "True"],
                                                                                          ["False"])


def test_templated_arguments_are_checked_per_host_before_connecting(tmp_path):
    book = load(tmp_path, "vars: {mode_var: '0644'}\nsteps:\n  - include: gpu-node\n"
                          "  - file: {path: /x, content: y, mode: '{{ mode_var }}'}\n"
                          "  - when: facts.os.id == 'debian'\n    file: {path: /y, content: '{{ facts.x }}', "
                          "mode: '{{ facts.bad }}'}\n")
    hosts = [Host(name="a", address="10.0.0.1"), Host(name="b", address="10.0.0.2", vars={"mode_var": "rw"})]
    check_arguments(book, hosts[:1], {})  # facts-dependent steps are left for the host
    with pytest.raises(UsageError) as caught:
        check_arguments(book, hosts, {})
    assert "mode_var" in str(caught.value) and "as host b sees it" in str(caught.value)
    assert "p.yml:4: " in str(caught.value)
    with pytest.raises(UsageError) as caught:
        check_arguments(book, hosts[:1], {"driver_branch": "abc"})
    assert "nvidia_driver.branch must be a number, got 'abc'" in str(caught.value)
    assert "driver_branch=535" in caught.value.fix
    check_arguments(book, hosts[:1], {"driver_branch": "550", "install_docker": False})


def test_a_non_utf8_inventory_is_a_file_line_error(tmp_path):
    from gpunode.inventory import load_inventory

    path = tmp_path / "hosts.ini"
    path.write_bytes(b"[gpu]\nh1 ansible_host=10.0.0.1 note=caf\xe9\n")
    with pytest.raises(UsageError) as caught:
        load_inventory([str(path)])
    assert "hosts.ini:2: not UTF-8 text: byte 0xe9 at column 34" in str(caught.value) and "iconv" in caught.value.fix


def test_a_variable_set_nowhere_is_refused_before_connecting(tmp_path):
    """Trial of issues 26-28: `--playbook nfs` without nfs_server failed on every host after connecting ("'nfs_server'
    is undefined", fix "fix the playbook or the variable it uses"), though no inventory, playbook or -e value set it."""
    book = load(tmp_path, "steps:\n  - name: share\n"
                          "    line: {path: /etc/x, line: '{{ server }}:/data', create: true}\n"
                          "  - name: from facts\n    file: {path: /y, content: '{{ facts.os.id }}'}\n"
                          "  - command: {cmd: 'true'}\n    register: r\n"
                          "  - file: {path: /z, content: '{{ r.stdout }} {{ other | default(1) }}'}\n")
    host = Host(name="a", address="10.0.0.1")
    with pytest.raises(UsageError) as caught:
        check_arguments(book, [host], {})
    assert "p.yml:3: " in str(caught.value) and "'server' is undefined" in str(caught.value)
    assert "-e server=" in caught.value.fix
    check_arguments(book, [host], {"server": "nas"})  # facts and registered results are left for the host
    check_arguments(book, [Host(name="b", address="10.0.0.2", vars={"server": "nas"})], {})


def test_a_missing_fact_is_named_without_internal_type_names():
    """Trial of issues 26-28: `{{ facts.nope }}` failed with "'gpunode.facts.model.Facts object' has no attribute"."""
    from gpunode.facts import Facts
    from gpunode.playbook.template import TemplateError, render

    facts = Facts()
    for text, owner in (("{{ facts.nope }}", "facts has no"), ("{{ facts.os.nope }}", "this part of facts has no")):
        with pytest.raises(TemplateError) as caught:
            render(text, {"facts": facts})
        assert owner in str(caught.value) and "gpunode." not in str(caught.value), caught.value


def test_a_when_reading_a_name_registered_nowhere_before_is_refused_before_connecting(tmp_path):
    """Trial: `when: rr.rc == 0` with rr registered by no earlier step failed on each host after connecting. Names an
    earlier step registers, playbook/inventory/-e vars, facts and `is defined` tests are left alone."""
    book = load(tmp_path, "steps:\n  - command: {cmd: 'true'}\n    register: r\n"
                          "  - command: {cmd: 'true'}\n    when: r.rc == 0 and facts.os.id == 'ubuntu'\n"
                          "  - command: {cmd: 'true'}\n    when: facts.gpus and rr is defined\n"
                          "  - command: {cmd: 'true'}\n    when: rr.rc == 0\n"
                          "  - command: {cmd: 'false'}\n    register: rr\n")
    host = Host(name="a", address="10.0.0.1")
    with pytest.raises(UsageError) as caught:
        check_arguments(book, [host], {})
    assert "p.yml:8: " in str(caught.value) and "'rr' is undefined" in str(caught.value), str(caught.value)
    assert "only a later step registers it" in str(caught.value)
    assert "register: rr" in caught.value.fix and "-e rr=" in caught.value.fix
    check_arguments(book, [host], {"rr": {"rc": 0}})  # -e
    check_arguments(book, [Host(name="b", address="10.0.0.2", vars={"rr": {"rc": 1}})], {})  # inventory var
    with_var = load(tmp_path, "vars: {rr: {rc: 0}}\nsteps:\n  - command: {cmd: 'true'}\n    when: rr.rc == 0\n")
    check_arguments(with_var, [host], {})  # playbook var


def test_a_key_written_twice_in_one_mapping_is_refused_with_both_lines(tmp_path) -> None:
    """PyYAML keeps the last of two equal keys silently (a merge once left gpu-node.yml with module_cache twice);
    a key that overrides one merged in by `<<:` is YAML's own override and stays allowed."""
    from gpunode.errors import UsageError
    from gpunode.yamlfile import load_yaml_text

    with pytest.raises(UsageError) as error:
        load_yaml_text("name: x\nvars:\n  a: 1\n  a: 2\nsteps: []\n", "dup.yml")
    assert error.value.line == 4 and "duplicate key 'a' (also at line 3)" in str(error.value)
    assert error.value.fix == "keep one of the two keys"
    merged = load_yaml_text("base: &b\n  a: 1\nvars:\n  <<: *b\n  a: 2\n", "merge.yml")
    assert merged["vars"] == {"a": 2}
