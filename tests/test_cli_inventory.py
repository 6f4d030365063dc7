"""The `inventory` task and inventory errors, from the command line: exit 2 with file:line, nothing runs."""

from __future__ import annotations

import json

from tests.conftest import REPO, run_cli


def test_inventory_list_graph_and_host():
    listed = run_cli("inventory", "-i", "inventory/aws-gpu.yml", "--list")
    assert listed.code == 0, listed.output
    data = json.loads(listed.stdout)
    assert "_meta" in data and data["_meta"]["hostvars"]
    graph = run_cli("inventory", "-i", "inventory/aliyun-gpu.ini", "--graph")
    assert graph.code == 0 and graph.stdout.startswith("@all:")
    some_host = next(iter(data["_meta"]["hostvars"]))
    one = run_cli("inventory", "-i", "inventory/aws-gpu.yml", "--host", some_host, "--json")
    assert json.loads(one.stdout) == data["_meta"]["hostvars"][some_host]


def test_malformed_inventory_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "hosts.yml"
    bad.write_text("all:\n  hosts:\n    gpu-1:\n      ansible_port: 22x\n")
    for task in (["provision", "--playbook", str(REPO / "playbooks/base.yml")], ["inventory"]):
        result = run_cli(*task, "-i", str(bad))
        assert result.code == 2, result.output
        assert f"{bad}:4" in result.stderr and "port" in result.stderr
        assert "Traceback" not in result.output
    broken = tmp_path / "broken.yml"
    broken.write_text("all:\n  hosts:\n    a: {ansible_host: [1.2.3.4\n")
    result = run_cli("provision", "-i", str(broken), "--playbook", "playbooks/base.yml")
    assert result.code == 2 and f"{broken}:" in result.stderr and "malformed YAML" in result.stderr


def test_unknown_limit_exits_2():
    result = run_cli("provision", "-i", "inventory/aws-gpu.yml", "--limit", "no_such_group", "--playbook",
                     "playbooks/base.yml")
    assert result.code == 2
    assert "no_such_group" in result.stderr
