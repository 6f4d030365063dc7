"""A rolling run on lab hosts whose inventory says `gpunode_scheduler: slurm` but which have no Slurm (no
`scontrol`): the user is told that, with the fix (install Slurm's client, or take the variable off), the step that
disturbs the GPUs does not run, and no "resume it by hand" is asked for a node that was never drained."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab


def test_slurm_scheduler_without_scontrol_fails_before_the_change_with_the_fix(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", gpunode_scheduler="slurm")
    book = tmp_path / "roll.yml"
    book.write_text(yaml.safe_dump({"name": "roll", "serial": 1, "steps": [
        {"name": "marker", "file": {"path": "/etc/gpunode-trial-marker", "content": "v1\n"}},
        {"name": "reload the module", "command": {"cmd": "touch /tmp/gpunode-trial-disturbed",
                                                  "creates": "/tmp/gpunode-trial-disturbed"},
         "disturbs_gpus": True}]}))
    report = tmp_path / "r.json"
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report", str(report))
    assert result.code == 1, result.output
    host = json.loads(report.read_text())["hosts"][0]
    assert host["failed_step"] == "reload the module"
    assert "this host has no scontrol (exit 127" in host["error"] and "gpunode_scheduler: slurm" in host["error"]
    assert "slurm-client" in host["fix"] and "resume it by hand" not in host["fix"]
    assert {s["name"]: s["status"] for s in host["steps"]}["marker"] == "changed"
    # the disturbing step never ran on the host (its `creates` file is still absent); --check reads the node's state
    # as the drain would, so it predicts the same failure instead of a drain that cannot happen
    check = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--check", "--json-report",
                    str(tmp_path / "c.json"))
    checked = json.loads((tmp_path / "c.json").read_text())["hosts"][0]
    steps = {s["name"]: s["status"] for s in checked["steps"]}
    assert check.code == 1 and steps == {"marker": "ok", "reload the module": "failed"}, check.output
    assert "this host has no scontrol (exit 127" in checked["error"] and "slurm-client" in checked["fix"]


def test_the_health_check_on_a_host_without_slurm_says_it_could_not_drain(lab, fresh_host, tmp_path):
    """gpu-node's `accept` tag with slurm_healthcheck=true on a host with no Slurm: installed once (the second run
    changes nothing), and run by hand it fails (no driver here) and says the drain did not happen, rather than only
    "draining" while scontrol is not found."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    args = ("provision", "-i", str(inventory), "--playbook", "gpu-node", "--tags", "accept", "--var",
            "slurm_healthcheck=true")
    first = run_cli(*args, "--json-report", str(tmp_path / "1.json"))
    assert first.code == 0, first.output
    second = run_cli(*args, "--json-report", str(tmp_path / "2.json"))
    assert second.code == 0 and json.loads((tmp_path / "2.json").read_text())["hosts"][0]["status"] == "ok"
    ran = fresh_host.run_inside("/usr/local/libexec/gpunode/slurm-healthcheck")
    assert ran.returncode == 1, ran
    assert "fail: gpunode quick nvidia-smi: nvidia-smi is not installed" in ran.stdout
    assert "could not drain the node: `scontrol update` failed (exit 127); the node is unchanged" in ran.stdout
