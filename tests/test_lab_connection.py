"""Connections to real lab hosts: host keys, sudo passwords, quoting, reboots."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from gpunode.app.hosts import load_hosts
from gpunode.connection import ConnectOptions, connect
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

WRITE_FILE = """
name: write
steps:
  - name: a file with an awkward name
    file:
      path: "{{ target }}"
      content: "{{ body }}"
      mode: "0640"
"""


def test_changed_host_key_is_refused_even_with_accept_new(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    impostor = tmp_path / "known_hosts"
    other = list(lab.hosts.values())[1]
    impostor.write_text(f"{host.address} {lab.host_public_key(other)}\n")  # another host's key
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", known_hosts=str(impostor))
    for extra in ([], ["--accept-new-host-keys"]):
        result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml", *extra,
                         env={"GPUNODE_KNOWN_HOSTS": str(tmp_path / "gpunode_known_hosts")})
        assert result.code == 1
        assert "SSH host key CHANGED" in result.stdout
        assert "ssh-keygen -R" in result.stdout


def test_unknown_host_key_refused_then_trusted_on_first_use(lab, tmp_path):
    host = list(lab.hosts.values())[0]
    own = tmp_path / "gpunode_known_hosts"
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", known_hosts=str(tmp_path / "none"))
    env = {"GPUNODE_KNOWN_HOSTS": str(own), "HOME": str(tmp_path)}  # no ~/.ssh/known_hosts either
    refused = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml", env=env)
    assert refused.code == 1 and "unknown SSH host key" in refused.stdout
    assert not own.exists()
    trusted = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml",
                      "--accept-new-host-keys", env=env)
    assert trusted.code == 0, trusted.output
    assert own.read_text().split()[:2] == [host.address, "ssh-ed25519"]
    again = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml", env=env)
    assert again.code == 0, again.output  # now verified against the recorded key


def test_values_reach_the_shell_quoted(lab, fresh_host, tmp_path):
    playbook = tmp_path / "write.yml"
    playbook.write_text(WRITE_FILE)
    target = "/srv/odd dir/it's $(touch /srv/pwned) `id` ; x.conf"
    body = "line with 'single' and \"double\" quotes, $HOME, $(reboot) and a \\ backslash\n"
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook),
                     "--var", f"target={json.dumps(target)}", "--var", f"body={json.dumps(body)}")
    assert result.code == 0, result.output
    written = Path(fresh_host.root) / target.lstrip("/")
    assert written.read_text() == body
    assert oct(written.stat().st_mode & 0o777) == "0o640"
    assert not (Path(fresh_host.root) / "srv/pwned").exists()


def test_sudo_password_is_used_and_never_logged(lab, fresh_host, tmp_path):
    secret = "S3cret-sudo-pw"
    setup = fresh_host.run_inside(
        "useradd -m -s /bin/bash ops && echo 'ops:" + secret + "' | chpasswd && "
        "echo 'ops ALL=(ALL) ALL' > /etc/sudoers.d/ops && mkdir -p ~ops/.ssh && "
        "cp /home/gpunode/.ssh/authorized_keys ~ops/.ssh/ && chown -R ops: ~ops/.ssh"
    )
    assert setup.returncode == 0, setup.stderr
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", ansible_user="ops",
                               ansible_become_password=secret)
    logs = tmp_path / "logs"
    result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/base.yml", "--log-dir", str(logs),
                     "--json-report", str(tmp_path / "r.json"))
    assert result.code == 0, result.output
    assert fresh_host.run_inside("dpkg -s jq >/dev/null && echo yes").stdout.strip() == "yes"
    shown = run_cli("inventory", "-i", str(inventory), "--host", fresh_host.name)
    everything = result.output + shown.output + (tmp_path / "r.json").read_text()
    everything += "".join(p.read_text() for p in logs.iterdir())
    assert secret not in everything
    assert "ansible_become_password" in shown.stdout


def test_reboot_reconnects_after_the_boot_id_changes(lab, fresh_host, tmp_path):
    playbook = tmp_path / "reboot.yml"
    playbook.write_text("name: reboot\nsteps:\n  - reboot: {if_required: false, timeout: 120}\n"
                        "  - file: {path: /root/after-reboot, content: \"ok\\n\"}\n")
    before = fresh_host.run_inside("cut -d' ' -f22 /proc/1/stat").stdout
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook),
                     "--json-report", str(tmp_path / "r.json"))
    assert result.code == 0, result.output
    steps = json.loads((tmp_path / "r.json").read_text())["hosts"][0]["steps"]
    assert [s["status"] for s in steps] == ["changed", "changed"]
    assert fresh_host.run_inside("cut -d' ' -f22 /proc/1/stat").stdout != before
    assert fresh_host.run_inside("cat /root/after-reboot").stdout == "ok\n"


def test_secret_variables_stay_out_of_diffs_reports_and_logs(lab, fresh_host, tmp_path):
    token = "tok-8c1f0e6a9b7d"
    playbook = tmp_path / "secret.yml"
    playbook.write_text('steps:\n  - file: {path: /etc/registry-auth.conf, content: "token={{ registry_token }}\\n"}\n')
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", registry_token=token)
    logs = tmp_path / "logs"
    seen = ""
    for extra in (["--check"], [], []):  # the third run probes the file that now holds the token
        result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), *extra, "--log-dir",
                         str(logs), "--json-report", str(tmp_path / "r.json"))
        assert result.code == 0, result.output
        seen += result.output + (tmp_path / "r.json").read_text()
    seen += "".join(p.read_text() for p in logs.iterdir())
    assert "+token=********" in seen  # the check-mode diff, masked
    assert token not in seen
    assert base64.b64encode(f"token={token}\n".encode()).decode() not in seen
    assert (fresh_host.root / "etc/registry-auth.conf").read_text() == f"token={token}\n"


def test_large_input_and_output_travel_whole(lab, fresh_host, tmp_path):
    """20 MiB in, a 4 MB line out (the package share's and module cache's transfers): the bytes arrive unchanged and
    the output callback gets whole lines, a UTF-8 character split between packets included."""
    _, (host,) = load_hosts([str(host_inventory(lab, [fresh_host], tmp_path / "inv.yml"))], None, None)
    conn = connect(host, ConnectOptions())
    data = os.urandom(20 << 20)
    lines: list[str] = []
    try:
        command = "sha256sum | cut -d' ' -f1; printf 'caf\\303\\251\\n'; head -c 3000000 /dev/zero | base64 -w0"
        result = conn.run(command, stdin=data, on_output=lines.append, timeout=300)
    finally:
        conn.close()
    assert result.ok, result.stderr
    assert lines[:2] == [hashlib.sha256(data).hexdigest(), "café"]
    assert lines[2] == "A" * 4000000 and len(lines) == 3
    assert result.stdout.splitlines()[2] == lines[2]
