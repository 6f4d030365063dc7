"""On a real lab host: a run gathers, at its start, only the facts sections its steps and templates read; what step
code reads only when it must change something (a package install reads the package manager's state) is gathered
then, inside the lock's session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.facts import parse_facts
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

# `line` reads no facts; its `when:` reads the host's mounts (the storage section), its handler's `when:` fstab
PLAYBOOK = """steps:
  - name: marker line
    line: {path: /etc/gpunode-sections-test, line: "seen=1", create: true}
    when: "'/' in (facts.storage.mounts | map(attribute='target') | list)"
    notify: [note]
  - packages: {names: [jq]}
handlers:
  - name: note
    when: "facts.storage.fstab_text is not none"
    command: {cmd: "echo handler >> /etc/gpunode-sections-test"}
"""


def cached(cache: Path):
    (path,) = list(cache.glob("gpunode/facts/*.facts"))
    return parse_facts(path.read_text())


def provision(inventory, playbook, report, env):
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report", str(report),
                     env=env)
    assert result.code == 0, result.output
    return json.loads(report.read_text())["hosts"][0]


def test_a_run_gathers_what_its_steps_and_templates_read(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)

    host = provision(inventory, playbook, tmp_path / "first.json", env)
    assert [s["status"] for s in host["steps"]] == ["changed", "changed", "changed"], host["steps"]
    assert fresh_host.run_inside("cat /etc/gpunode-sections-test").stdout == "seen=1\nhandler\n"
    labels = [c["label"] for c in host["commands"]]
    assert not [la for la in labels if la.startswith("facts: storage")], labels  # read by templates: at the start
    lazy = [c for c in host["commands"] if c["label"].startswith("facts: pkgmgr")]  # the install read it
    assert len(lazy) == 1 and lazy[0]["new_session"] is False and lazy[0]["exit_code"] == 0, host["commands"]
    assert cached(tmp_path / "cache").sections == {"core", "storage", "pkgmgr"}

    second = provision(inventory, playbook, tmp_path / "second.json", env)
    assert [s["status"] for s in second["steps"]] == ["ok", "ok"]
    assert second["exec_count"] == 1
    assert not [c for c in second["commands"] if c["label"].startswith("facts:")], second["commands"]
    assert cached(tmp_path / "cache").sections == {"core", "storage"}  # a converged packages step reads no pkgmgr


def test_a_user_command_is_never_run_on_the_last_runs_facts(lab, fresh_host, tmp_path):
    """The probe sent with the lock is built from the last run's facts; a step whose `when:` reads facts and whose
    probe runs the user's `unless:` is left out of it: a now-false `when:` runs nothing of the step."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - command: {cmd: 'true', unless: 'echo ran >> /root/unless-ran; false'}\n"
                        "    when: \"'#MARK' in facts.storage.fstab_text\"\n")
    fresh_host.run_inside("echo '#MARK' >> /etc/fstab")
    provision(inventory, playbook, tmp_path / "first.json", env)
    assert fresh_host.run_inside("cat /root/unless-ran").stdout == "ran\n"
    fresh_host.run_inside("sed -i '/#MARK/d' /etc/fstab; rm /root/unless-ran")
    host = provision(inventory, playbook, tmp_path / "second.json", env)
    assert [s["status"] for s in host["steps"]] == ["skipped"], host["steps"]
    assert not (fresh_host.root / "root/unless-ran").exists()


def test_the_gathered_sections_match_a_full_gather(lab, fresh_host, tmp_path):
    """The sections a playbook of file steps gathers are the same values `gpunode facts` reports."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - line: {path: /etc/gpunode-sections-test, line: x=1, create: true}\n")
    run = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), env=env)
    assert run.code == 0, run.output
    facts = cached(tmp_path / "cache")
    assert facts.sections == {"core"}
    partial = facts.to_dict()
    full = run_cli("facts", "-i", str(inventory), fresh_host.name, "--json")
    assert full.code == 0, full.output
    whole = json.loads(full.stdout)
    for key in ("os", "kernel", "hostname", "boot_id", "container_virt", "user", "dmi"):
        assert partial[key] == whole[key], key
    assert "pkg" not in partial and "storage" not in partial and "pkg" in whole
