"""On a real lab host: a run gathers only the facts sections its steps read, and a section a step reads without
declaring it is gathered inside the lock's session when read, then asked for at once by the next run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.facts import parse_facts
from gpunode.runner import facts_cache
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

# `line` reads no facts; its `when:` reads the host's mounts (the storage section) all the same
PLAYBOOK = """steps:
  - name: marker line
    line: {path: /etc/gpunode-sections-test, line: "seen=1", create: true}
    when: "'/' in (facts.storage.mounts | map(attribute='target') | list)"
  - packages: {names: [sed]}
"""


def cached_sections(cache: str) -> frozenset[str]:
    (path,) = list(Path(cache).glob("gpunode/facts/*.facts"))
    return facts_cache.sections(path.read_text())


def test_a_run_gathers_what_its_steps_read(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)

    first = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                    str(tmp_path / "first.json"), env=env)
    assert first.code == 0, first.output
    host = json.loads((tmp_path / "first.json").read_text())["hosts"][0]
    assert [s["status"] for s in host["steps"]] == ["changed", "ok"], host["steps"]  # `when` saw the real mounts
    assert fresh_host.run_inside("cat /etc/gpunode-sections-test").stdout == "seen=1\n"
    lazy = [c for c in host["commands"] if c["label"].startswith("facts: storage")]
    assert len(lazy) == 1 and lazy[0]["new_session"] is False and lazy[0]["exit_code"] == 0, host["commands"]
    # packages declares pkgmgr; the storage section was read by the `when`: the next run asks for both at once
    assert cached_sections(env["XDG_CACHE_HOME"]) == {"core", "pkgmgr", "storage"}

    second = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                     str(tmp_path / "second.json"), env=env)
    assert second.code == 0, second.output
    host = json.loads((tmp_path / "second.json").read_text())["hosts"][0]
    assert [s["status"] for s in host["steps"]] == ["ok", "ok"]
    assert host["exec_count"] == 1
    assert not [c for c in host["commands"] if c["label"].startswith("facts:")], host["commands"]


def test_the_gathered_sections_match_a_full_gather(lab, fresh_host, tmp_path):
    """The sections a playbook of file steps gathers are the same values `gpunode facts` reports."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - line: {path: /etc/gpunode-sections-test, line: x=1, create: true}\n")
    run = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), env=env)
    assert run.code == 0, run.output
    (path,) = list((tmp_path / "cache").glob("gpunode/facts/*.facts"))
    assert facts_cache.sections(path.read_text()) == {"core"}
    partial = parse_facts(path.read_text()).to_dict()
    full = run_cli("facts", "-i", str(inventory), fresh_host.name, "--json")
    assert full.code == 0, full.output
    whole = json.loads(full.stdout)
    for key in ("os", "kernel", "hostname", "boot_id", "container_virt", "user", "dmi"):
        assert partial[key] == whole[key], key
    assert "pkg" not in partial and "storage" not in partial and "pkg" in whole
