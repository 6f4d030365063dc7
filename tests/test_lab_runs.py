"""Runs on real lab hosts: package-manager locks, Ctrl-C, bastions, ~/.ssh/config, localhost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, host_inventory, run_cli

pytestmark = pytest.mark.lab

HOLD_DPKG_LOCK = (
    "setsid python3 -c \"import fcntl,time; f=open('/var/lib/dpkg/lock-frontend','w'); "
    "fcntl.lockf(f, fcntl.LOCK_EX); time.sleep(600)\" >/dev/null 2>&1 < /dev/null & echo started"
)


def test_waits_for_the_dpkg_lock_and_names_its_holder(lab, fresh_host, tmp_path):
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - wait_for_package_manager: {timeout: 4}\n  - packages: {names: [jq]}\n")
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    assert fresh_host.run_inside(HOLD_DPKG_LOCK).stdout.strip() == "started"
    time.sleep(0.5)
    blocked = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                      str(tmp_path / "r.json"))
    assert blocked.code == 1, blocked.output
    host = json.loads((tmp_path / "r.json").read_text())["hosts"][0]
    assert host["failed_step"] == "wait_for_package_manager"
    assert "/var/lib/dpkg/lock-frontend held by pid" in host["error"] and "python3" in host["error"]
    assert [s["status"] for s in host["steps"]] == ["failed"]  # nothing was installed after it
    fresh_host.run_inside("pkill -f 'fcntl.lockf'")
    time.sleep(0.3)
    freed = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook))
    assert freed.code == 0, freed.output


def test_ctrl_c_stops_cleanly_and_releases_the_remote_lock(lab, tmp_path):
    host = list(lab.hosts.values())[2]
    playbook = tmp_path / "slow.yml"
    playbook.write_text("steps:\n  - command: {cmd: sleep 20}\n  - file: {path: /root/never, content: x}\n")
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    process = subprocess.Popen([sys.executable, "-m", "gpunode", "provision", "-i", str(inventory), "--playbook",
                                str(playbook), "--json-report", str(tmp_path / "r.json")],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while "sleep 20" not in host.run_inside("ps -eo args").stdout and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 1, output
    report = json.loads((tmp_path / "r.json").read_text())["hosts"][0]
    assert report["status"] == "cancelled"
    assert [s["status"] for s in report["steps"]] == ["cancelled"]  # live, summary and report say the same
    assert ": failed" not in output and ": cancelled" in output, output
    assert not (host.root / "root/never").exists()
    lock_free = host.run_inside("flock -n /run/lock/gpunode.lock true && echo free").stdout.strip()
    assert lock_free == "free"


def test_through_a_bastion_with_proxyjump_and_ansible_proxycommand(lab, tmp_path):
    bastion, target = list(lab.hosts.values())[:2]
    jump_inventory = host_inventory(lab, [target], tmp_path / "jump.yml", jump=f"gpunode@{bastion.address}")
    ini = tmp_path / "inv.ini"
    ini.write_text(
        f"[gpu]\n{target.name} ansible_host={target.address}\n\n[gpu:vars]\nansible_user=gpunode\n"
        f"ansible_become=true\nansible_ssh_private_key_file={lab.key_path}\nknown_hosts={lab.known_hosts_path}\n"
        f"ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p -q gpunode@{bastion.address}\"'\n"
    )
    for inventory in (jump_inventory, ini):
        since = target.run_inside("date +%s").stdout.strip()
        result = run_cli("facts", "-i", str(inventory), target.name, "--json")
        assert result.code == 0, result.output
        assert json.loads(result.stdout)["hostname"] == target.name
        log = target.run_inside(f"journalctl -u ssh --since @{since} --no-pager -o cat").stdout
        assert f"Accepted publickey for gpunode from {bastion.address}" in log, log


def test_ssh_config_aliases_are_honoured(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host gpu-alias\n  HostName {host.address}\n  User gpunode\n  IdentityFile {lab.key_path}\n")
    (home / ".ssh" / "known_hosts").write_text(lab.known_hosts_path.read_text())
    result = run_cli("facts", "gpu-alias", "--json", env={"HOME": str(home)})
    assert result.code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["hostname"] == host.name and facts["user"] == "gpunode"


def test_localhost_runs_without_ssh(tmp_path):
    target = tmp_path / "local.conf"
    playbook = tmp_path / "local.yml"
    playbook.write_text(f"steps:\n  - line: {{path: {target}, line: managed=1, create: true}}\n")
    first = run_cli("provision", "-H", "localhost", "--playbook", str(playbook))
    assert first.code == 0, first.output
    assert target.read_text() == "managed=1\n"
    second = run_cli("provision", "-H", "localhost", "--playbook", str(playbook), "--json-report",
                     str(tmp_path / "r.json"))
    assert second.code == 0, second.output
    assert json.loads((tmp_path / "r.json").read_text())["hosts"][0]["changed"] == 0
