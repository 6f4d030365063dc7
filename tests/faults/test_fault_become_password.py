"""A become password reaches sudo only when sudo asks for it (must-show 3 of issue 16).

Before: `sudo -S` was always fed the password on stdin; on a NOPASSWD host sudo never read it, so the command
read it as its first line of input (`sh: 1: ********: not found`, file content shifted by one line).
Guards: gpunode/connection/base.py `wrap` (a unique sudo prompt and a started marker) and
gpunode/connection/ssh.py `_handshake` (the password is sent only after the prompt appears).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import run_cli

pytestmark = pytest.mark.lab

PASSWORD = "Pw-gpunode-16!"  # noqa: S105 - a lab-only password, set in the test's own host
PLAYBOOK = """steps:
  - name: conf
    file: {path: "/root/{{ inventory_hostname }}.conf", content: "a=1\\nb=2\\n", mode: "0600"}
  - name: line
    line: {path: "/root/{{ inventory_hostname }}.lines", line: "c=3", create: true}
  - name: pkg
    packages: {names: [hello]}
  - name: cmd
    command: {cmd: "id -u > /root/{{ inventory_hostname }}.uid", creates: "/root/{{ inventory_hostname }}.uid"}
"""


def test_become_password_on_nopasswd_and_password_sudo_hosts(lab, fresh_host, tmp_path):
    setup = (f"useradd -m -s /bin/bash -G sudo pwuser && echo 'pwuser:{PASSWORD}' | chpasswd && "
             "install -d -o pwuser -g pwuser -m 700 /home/pwuser/.ssh && "
             "install -o pwuser -g pwuser -m 600 /home/gpunode/.ssh/authorized_keys /home/pwuser/.ssh/ && "
             "grep -rh NOPASSWD /etc/sudoers /etc/sudoers.d | grep -v '^#' | grep -c pwuser; true")
    result = fresh_host.run_inside(setup)
    assert result.stdout.strip() == "0", result.stdout + result.stderr  # pwuser's sudo needs the password
    common = {"ansible_host": fresh_host.address, "ansible_become": True, "ansible_become_password": PASSWORD,
              "ansible_ssh_private_key_file": str(lab.key_path), "known_hosts": str(lab.known_hosts_path)}
    inventory = tmp_path / "inv.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "nopasswd": {**common, "ansible_user": "gpunode"},
        "withpasswd": {**common, "ansible_user": "pwuser"},
    }}}))
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    logs = tmp_path / "logs"
    for attempt in ("first", "second"):
        # -f 1: both names are the same machine, which has one run lock
        run = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "-f", "1", "--json-report",
                      str(tmp_path / f"{attempt}.json"), "--log-dir", str(logs / attempt))
        assert run.code == 0, run.output
    report = json.loads((tmp_path / "second.json").read_text())
    assert [h["changed"] for h in report["hosts"]] == [0, 0], report  # converged on both
    for name in ("nopasswd", "withpasswd"):
        assert fresh_host.run_inside(f"cat /root/{name}.conf").stdout == "a=1\nb=2\n"
        assert fresh_host.run_inside(f"cat /root/{name}.lines").stdout == "c=3\n"
        assert fresh_host.run_inside(f"cat /root/{name}.uid").stdout.strip() == "0"
    assert "ii  hello" in fresh_host.run_inside("dpkg -l hello").stdout
    everything = "".join(p.read_text() for p in logs.rglob("*.log")) + run.output
    assert "not found" not in everything and PASSWORD not in everything
    # the host's own record: no shell ever ran the password as a command (sudo logs every command it ran)
    journal = fresh_host.run_inside("journalctl --no-pager -o cat").stdout
    assert PASSWORD not in journal
    assert "incorrect password" not in journal
