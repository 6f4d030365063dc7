"""Built-in playbooks by name, includes with their own vars, tags: validated before anything runs, file:line."""

from __future__ import annotations

import re

import pytest
import yaml

from gpunode.errors import UsageError
from gpunode.playbook import builtin_names, builtin_path, load_playbook, select_steps
from gpunode.playbook.builtin import PACKER_DIR, PLAYBOOKS_DIR
from tests.conftest import REPO, run_cli


def write(folder, name, text):
    path = folder / name
    path.write_text(text)
    return path


def test_builtins_are_the_repo_playbooks_and_templates():
    assert PLAYBOOKS_DIR.resolve() == (REPO / "playbooks").resolve()  # one source of truth, linked into the package
    assert PACKER_DIR.resolve() == (REPO / "packer").resolve()
    assert builtin_names() == ["base", "gpu-node", "image-finalize", "nfs"]
    assert load_playbook("gpu-node").path == str(builtin_path("gpu-node"))


def test_include_scopes_vars_when_and_tags(tmp_path):
    write(tmp_path, "mine.yml", "vars: {who: mine}\nsteps:\n  - name: own\n    tags: [own]\n"
          "    command: {cmd: 'echo {{ who }} {{ x }}'}\n")
    site = write(tmp_path, "site.yml", """\
vars: {x: site}
steps:
  - include: gpu-node
    vars: {driver_branch: 550}
    when: facts.os.family == 'debian'
    tags: [gpu]
  - include: ./mine.yml
    vars: {who: include}
  - name: top
    command: {cmd: 'echo {{ x }}'}
""")
    book = load_playbook(site)
    driver = next(s for s in book.steps if s.name == "NVIDIA driver")
    assert driver.where == f"{builtin_path('gpu-node')}:{driver.line}"
    assert (driver.vars["driver_branch"], driver.vars["kernel_policy"], driver.vars["x"]) == (550, "require", "site")
    assert driver.tags == ["gpu", "driver"]
    assert driver.when == "facts.os.family == 'debian'"
    toolkit = next(s for s in book.steps if s.name == "NVIDIA container toolkit")
    assert toolkit.when == "(facts.os.family == 'debian') and (install_container_toolkit)"
    own = next(s for s in book.steps if s.name == "own")
    assert own.vars == {"who": "include", "x": "site"} and own.where == f"{tmp_path / 'mine.yml'}:5"
    assert book.steps[-1].name == "top" and book.steps[-1].vars == {}  # the top playbook's vars apply as before
    assert set(book.handlers) == {"restart docker", "restart containerd"}


def test_a_file_next_to_the_playbook_named_like_a_builtin_does_not_shadow_it(tmp_path, monkeypatch):
    write(tmp_path, "gpu-node.yml", "steps:\n  - command: {cmd: 'true'}\n")
    site = write(tmp_path, "site.yml", "steps:\n  - include: gpu-node\n  - include: gpu-node.yml\n")
    monkeypatch.chdir(tmp_path)
    book = load_playbook(site)
    assert book.steps[0].source == str(builtin_path("gpu-node"))
    assert book.steps[-1].source == str(tmp_path / "gpu-node.yml")
    assert load_playbook("gpu-node").path == str(builtin_path("gpu-node"))
    assert load_playbook("./gpu-node.yml").steps[0].kind == "command"


@pytest.mark.parametrize(("text", "line", "message"), [
    ("steps:\n  - include: gpu-nod\n", 2, "unknown built-in playbook 'gpu-nod'"),
    ("steps:\n  - include: ./missing.yml\n", 2, "no such file"),
    ("steps:\n  - include: base\n    packages: {names: [jq]}\n", 3, "unknown key 'packages' in an include"),
    ("steps:\n  - include: base\n    vars: [a]\n", 3, "`vars` of an include must be a mapping"),
    ("steps:\n  - include: base\n    tags: {a: 1}\n", 3, "`tags` must be a name or a list"),
    ("steps:\n  - include: ./p.yml\n", 2, "include loop"),
    ("steps:\n  - command: {cmd: x}\n    tags: 'a,b'\n", 3, "`tags` must be a name or a list"),
    ("steps:\n  - service: {name: x}\n    notify: h\nhandlers:\n  - name: h\n    tags: [x]\n    service: {name: x}\n",
     7, "`tags` on a handler have no effect"),
    ("steps:\n  - include: gpu-node\nhandlers:\n  - name: restart docker\n    command: {cmd: x}\n", 5,
     "handler 'restart docker'"),
])
def test_composition_errors_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, "p.yml", text)
    with pytest.raises(UsageError) as caught:
        load_playbook(path)
    assert f"{path}:{line}:" in str(caught.value)
    assert message in str(caught.value)


def test_an_error_inside_an_included_file_names_that_file(tmp_path):
    inner = write(tmp_path, "inner.yml", "steps:\n  - packages: {names: [jq], state: gone}\n")
    outer = write(tmp_path, "outer.yml", "steps:\n  - include: inner.yml\n")
    with pytest.raises(UsageError, match=f"{inner}:2: .*must be one of"):
        load_playbook(outer)


def test_tags_select_and_unknown_tags_are_errors():
    book = load_playbook("gpu-node")
    assert [s.name for s in select_steps(book, ["docker"], []).steps] == ["wait for the package manager", "Docker"]
    skipped = [s.kind for s in select_steps(book, [], ["driver", "kernel"]).steps]
    assert "nvidia_driver" not in skipped and "kernel_headers" not in skipped and "docker" in skipped
    with pytest.raises(UsageError, match="has the tag 'drivers'") as caught:
        select_steps(book, ["drivers"], [])
    assert "kernel, driver" in caught.value.fix
    with pytest.raises(UsageError, match="tags no step"):
        select_steps(load_playbook("image-finalize"), [], ["x"])


def test_unknown_playbook_name_exits_2_listing_the_builtins():
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", "gpu-nodes")
    assert result.code == 2, result.output
    assert "unknown built-in playbook 'gpu-nodes'" in result.stderr
    assert "base, gpu-node, image-finalize, nfs" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output


def test_a_builtin_file_name_given_as_a_path_says_to_use_the_bare_name(tmp_path):
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", "gpu-node.yml")
    assert result.code == 2 and "--playbook gpu-node" in result.stderr


def test_playbooks_lists_every_variable_and_default_from_the_files():
    result = run_cli("playbooks", "--json")
    assert result.code == 0, result.output
    listed = {p["name"]: p for p in __import__("json").loads(result.stdout)}
    assert sorted(listed) == builtin_names()
    for name in builtin_names():
        defaults = yaml.safe_load(builtin_path(name).read_text())["vars"]
        variables = {v["name"]: v for v in listed[name]["variables"]}
        assert {k: v["default"] for k, v in variables.items() if not v["required"]} == defaults
        assert all(v["comment"] for v in variables.values()), f"{name}: document every variable with a comment"
    assert {v["name"] for v in listed["nfs"]["variables"] if v["required"]} == {"nfs_server", "nfs_export", "nfs_path"}
    assert "driver" in listed["gpu-node"]["tags"]
    text = run_cli("playbooks").stdout
    assert re.search(r"kernel_policy += require  # require: fail when the running kernel has no headers", text)
    assert run_cli("playbooks", "--show", "base").stdout == builtin_path("base").read_text()


def test_version_is_the_package_version():
    from importlib.metadata import version

    result = run_cli("--version")
    assert result.code == 0 and result.stdout.strip() == f"gpunode {version('gpunode')}"
