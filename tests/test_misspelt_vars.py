"""A variable the playbook never reads but whose name is close to one it does (`kernel_polcy`) is named with the near
match before any host is contacted; Ansible ignores it silently and the playbook's default applies. Other unread
variables (an inventory serves many playbooks) say nothing. 192.0.2.1 (TEST-NET-1) answers nothing."""

from __future__ import annotations

from tests.conftest import run_cli


def _warnings(*args: str) -> list[str]:
    result = run_cli("provision", "--playbook", "gpu-node", "--check", *args, timeout=120)
    return [line for line in result.stderr.splitlines() if line.startswith("warning: variable")]


def test_a_near_miss_from_var_or_the_inventory_is_named(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\n192.0.2.1\n\n[gpu:vars]\nmodul_cache=/tmp/cache\nteam=ml\n")
    said = _warnings("-i", str(inventory), "--var", "kernel_polcy=upgrade", "-e", "region=cn-hangzhou")
    assert said == ["warning: variable kernel_polcy (from -e/--var) is not read by playbook gpu-node; did you mean "
                    "kernel_policy?",
                    "warning: variable modul_cache (from the inventory (host 192.0.2.1)) is not read by playbook "
                    "gpu-node; did you mean module_cache?"], said


def test_variables_the_playbook_reads_say_nothing():
    assert _warnings("-H", "192.0.2.1", "--var", "kernel_policy=upgrade", "--var", "module_cache=off",
                     "--var", "package_cache=off") == []
