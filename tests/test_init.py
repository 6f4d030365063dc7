"""`gpunode init DIR`: a project of the user's own that gpunode's own loaders (and invoke) accept as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from gpunode.inventory import load_inventory
from gpunode.playbook import builtin_path, load_playbook
from tests.conftest import REPO, run_cli

FILES = ["inventory/hosts", "inventory/group_vars/all.yml", "inventory/host_vars/gpu-1.yml", "site.yml",
         "README.md", "tasks.py", ".gitignore"]


def test_init_writes_a_project_and_refuses_to_overwrite_it(tmp_path):
    project = tmp_path / "infra"
    result = run_cli("init", str(project))
    assert result.code == 0, result.output
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(FILES)
    assert "gpunode provision -i inventory --playbook site.yml --check" in result.stdout
    before = (project / "site.yml").read_text()
    (project / "site.yml").write_text("# mine\n" + before)
    again = run_cli("init", str(project))
    assert again.code == 2 and "already has" in again.stderr and "--force" in again.stderr
    assert (project / "site.yml").read_text().startswith("# mine")
    assert run_cli("init", str(project), "--force").code == 0
    assert (project / "site.yml").read_text() == before
    asked_for_help = run_cli("init", "--help")  # Invoke would hand "--help" to the positional argument: help here
    assert asked_for_help.code == 0 and asked_for_help.stdout.startswith("Usage: gpunode [--core-opts] init ")
    assert not (Path(REPO) / "--help").exists()


def test_the_inventory_loads_and_every_documented_default_is_the_playbooks_own(tmp_path):
    project = tmp_path / "infra"
    assert run_cli("init", str(project)).code == 0
    inventory = load_inventory([project / "inventory"])  # all commented out: only the example host
    host = inventory.select("gpu")[0]
    assert (host.name, host.address, host.user) == ("gpu-1", "203.0.113.10", "ubuntu")

    # uncomment every `# name: value` line: the values gpunode then reads are exactly the playbooks' defaults
    all_yml = project / "inventory/group_vars/all.yml"
    lines = [m.group(1) for m in re.finditer(r"^# ([a-z_]+:.*)$", all_yml.read_text(), re.M)]
    all_yml.write_text("\n".join(lines) + "\n")
    resolved = load_inventory([project / "inventory"]).select("gpu")[0].vars
    for name in ("base", "gpu-node", "nfs"):
        for key, default in yaml.safe_load(builtin_path(name).read_text())["vars"].items():
            assert resolved[key] == default, (name, key)
    assert {"nfs_server", "nfs_export", "nfs_path", "expect_gpus", "ansible_become"} <= set(resolved)


def test_site_playbook_includes_gpu_node_and_readme_names_the_next_commands(tmp_path):
    project = tmp_path / "infra"
    assert run_cli("init", str(project)).code == 0
    book = load_playbook(project / "site.yml")
    sources = {Path(s.source).name for s in book.steps}
    assert sources == {"base.yml", "gpu-node.yml", "site.yml"}
    assert any(s.kind == "nvidia_driver" for s in book.steps)
    readme = (project / "README.md").read_text()
    for command in ("gpunode inventory -i inventory --graph", "gpunode provision -i inventory --playbook site.yml "
                    "--check", "gpunode provision -i inventory --playbook site.yml\n"):
        assert command in readme
    # gpunode is not on PyPI (issue 27): the README says how to install it from a wheel
    assert "pip install gpunode" not in readme and "pipx install gpunode" not in readme
    assert "pip wheel --no-deps -w dist ." in readme and "pipx install dist/gpunode-*.whl" in readme


def test_tasks_py_gives_invoke_users_the_same_tasks(tmp_path):
    project = tmp_path / "infra"
    assert run_cli("init", str(project)).code == 0
    invoke = Path(sys.executable).with_name("invoke")
    listed = subprocess.run([str(invoke), "--list"], cwd=project, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    for task in ("provision", "verify-gpu", "build-ami", "playbooks", "init"):
        assert re.search(rf"^\s+{task}\b", listed.stdout, re.M), task
