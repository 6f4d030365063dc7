"""base.yml on real lab hosts: first run changes, second run converges with one remote command per host."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab


def test_base_playbook_changes_then_converges(lab, fresh_trio, tmp_path):
    hosts = fresh_trio
    inventory = host_inventory(lab, hosts, tmp_path / "inv.yml")
    first = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml",
                    "--json-report", str(tmp_path / "first.json"), "--junit", str(tmp_path / "first.xml"))
    assert first.code == 0, first.output
    report = json.loads((tmp_path / "first.json").read_text())
    assert [h["status"] for h in report["hosts"]] == ["changed"] * 3
    for host in report["hosts"]:
        steps = {s["name"]: s for s in host["steps"]}
        assert steps["base packages"]["status"] == "changed"
        assert steps["restart journald"]["status"] == "changed"  # the handler ran once, after the line changed
        assert steps["no unattended package upgrades (dnf)"]["status"] == "skipped"
    assert ET.parse(tmp_path / "first.xml").getroot().tag == "testsuites"
    for host in hosts:
        inside = host.run_inside("dpkg -s jq >/dev/null && grep -c '^SystemMaxUse=1G$' /etc/systemd/journald.conf")
        assert inside.stdout.strip() == "1", inside.stderr

    for host in hosts:  # sshd logs every session it starts: the hosts' own count of remote commands
        host.run_inside("echo 'LogLevel VERBOSE' > /etc/ssh/sshd_config.d/90-count.conf && systemctl reload ssh")
    since = time.time()
    second = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml",
                     "--json-report", str(tmp_path / "second.json"))
    assert second.code == 0, second.output
    report = json.loads((tmp_path / "second.json").read_text())
    for host in report["hosts"]:
        assert host["status"] == "ok"
        assert host["changed"] == 0
        assert host["exec_count"] == 1, host  # lock + facts + batched probe, one session
        assert [c["new_session"] for c in host["commands"]] == [True, False], host["commands"]
        assert "sent with the lock" in host["commands"][1]["label"]  # built from the first run's facts: one round trip
        assert set(host["phases"]) >= {"connect", "lock + facts", "probe", "steps", "release"}
    for host in hosts:  # --sync: journald has written every line it received
        log = host.run_inside("journalctl --sync; journalctl --no-pager -o cat SYSLOG_IDENTIFIER=sshd "
                              f"--since @{since:.6f}").stdout
        assert log.count("Starting session:") == 1, log


def test_check_mode_shows_diffs_and_changes_nothing(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    before = fresh_host.run_inside("sha256sum /etc/systemd/journald.conf").stdout
    result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml", "--check",
                     "--json-report", str(tmp_path / "check.json"))
    assert result.code == 0, result.output
    assert "install packages: curl, gnupg, jq, pciutils" in result.stdout
    assert "+SystemMaxUse=1G" in result.stdout  # the diff of the managed line
    assert "disable apt-daily-upgrade.timer" in result.stdout
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["check"] is True and report["hosts"][0]["status"] == "would-change"
    assert fresh_host.run_inside("sha256sum /etc/systemd/journald.conf").stdout == before
    assert fresh_host.run_inside("dpkg -s jq").returncode != 0
    assert fresh_host.run_inside("systemctl is-enabled apt-daily-upgrade.timer").stdout.strip() == "enabled"


def test_one_unreachable_host_does_not_stop_the_others(lab, tmp_path):
    hosts = list(lab.hosts.values())[:2]
    inventory = host_inventory(lab, hosts, tmp_path / "inv.yml", extra_hosts={"ghost": lab.network.address(200)})
    result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml",
                     "--json-report", str(tmp_path / "r.json"))
    assert result.code == 1, result.output
    report = {h["host"]: h for h in json.loads((tmp_path / "r.json").read_text())["hosts"]}
    assert report["ghost"]["status"] == "unreachable"
    assert report["ghost"]["error"].startswith(f"no route to {lab.network.address(200)}:22")
    assert all(report[h.name]["status"] in ("ok", "changed") for h in hosts)
    assert "ghost" in result.stdout and "no route to" in result.stdout and "fix:" in result.stdout


def test_remote_lock_refuses_a_second_concurrent_run(lab, tmp_path):
    from gpunode.connection import ConnectOptions, connect
    from gpunode.inventory import load_inventory
    from gpunode.runner import remote_lock

    host_lab = list(lab.hosts.values())[0]
    inventory = host_inventory(lab, [host_lab], tmp_path / "inv.yml")
    host = load_inventory(str(inventory)).hosts[host_lab.name]
    conn = connect(host, ConnectOptions())
    lock = remote_lock.acquire(conn)
    try:
        result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml")
        assert result.code == 1
        assert "another gpunode run holds this host's lock" in result.stdout
    finally:
        lock.release()
        conn.close()
    again = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml")
    assert again.code == 0, again.output


def test_lab_hosts_apt_sends_no_pipelined_requests(lab):
    """A lab host's apt asks one request at a time (gpunode/lab/apt_sources.py NO_PIPELINING): pipelined through this
    machine's proxy, `apt-get update` once waited forever for an answer that never came."""
    host = next(iter(lab.hosts.values()))
    dumped = host.run_inside("apt-config dump Acquire::http::Pipeline-Depth")
    assert dumped.stdout.strip() == 'Acquire::http::Pipeline-Depth "0";', dumped.stdout + dumped.stderr
