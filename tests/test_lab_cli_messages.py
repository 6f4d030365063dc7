"""Messages on the real path, against lab hosts (issue 27): sudo that needs a password nobody gave, and an extra
variable of the wrong type refused before any login (the host's own sshd log shows none)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO, host_inventory, run_cli
from tests.test_extra_vars import declared_at

pytestmark = pytest.mark.lab

PASSWORD = "Pw-gpunode-27!"  # noqa: S105 - a lab-only password, set in the test's own host
PLAYBOOK = "steps:\n  - name: conf\n    file: {path: /root/k27.conf, content: \"a=1\\n\"}\n"


def password_sudo_inventory(lab, host, path):
    """An inventory that logs in as a user whose sudo needs a password, with become on and no password given."""
    setup = (f"useradd -m -s /bin/bash -G sudo pwuser && echo 'pwuser:{PASSWORD}' | chpasswd && "
             "install -d -o pwuser -g pwuser -m 700 /home/pwuser/.ssh && "
             "install -o pwuser -g pwuser -m 600 /home/gpunode/.ssh/authorized_keys /home/pwuser/.ssh/")
    assert host.run_inside(setup).returncode == 0
    path.write_text(yaml.safe_dump({"all": {"hosts": {"pw": {
        "ansible_host": host.address, "ansible_user": "pwuser", "ansible_become": True,
        "ansible_ssh_private_key_file": str(lab.key_path), "known_hosts": str(lab.known_hosts_path)}}}}))
    return path


def test_sudo_that_needs_a_password_says_so_and_ask_become_pass_gives_it(lab, fresh_host, tmp_path):
    inventory = password_sudo_inventory(lab, fresh_host, tmp_path / "inv.yml")
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--log-dir", str(tmp_path / "l"))
    assert result.code == 1, result.output
    assert "sudo on this host needs a password and none was given" in result.output
    assert "--ask-become-pass (-K)" in result.output and "ansible_become_password" in result.output
    assert "marker line" not in result.output and "coreutils" not in result.output

    # -K: asked once (no terminal here: getpass reads stdin), given to sudo only when it asks
    asked = subprocess.run([sys.executable, "-m", "gpunode", "provision", "-i", str(inventory), "--playbook",
                            str(playbook), "-K", "--log-dir", str(tmp_path / "l2")], cwd=REPO, input=PASSWORD + "\n",
                           capture_output=True, text=True, timeout=300, start_new_session=True)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert fresh_host.run_inside("cat /root/k27.conf").stdout == "a=1\n"
    assert PASSWORD not in asked.stdout + asked.stderr


def test_a_mistyped_extra_variable_is_refused_before_any_login(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    fresh_host.run_inside("echo 'LogLevel VERBOSE' > /etc/ssh/sshd_config.d/90-count.conf && systemctl reload ssh")
    since = time.time()
    result = run_cli("provision", "-i", str(inventory), "--playbook", "gpu-node",
                     "-e", "install_container_toolkit=maybe", "--log-dir", str(tmp_path / "l"))
    assert result.code == 2, result.output
    assert f"gpu-node.yml:{declared_at('install_container_toolkit')}:" in result.stderr
    assert "fix: give install_container_toolkit=true or install_container_toolkit=false" in result.stderr
    log = fresh_host.run_inside("journalctl --sync; journalctl --no-pager -o cat SYSLOG_IDENTIFIER=sshd "
                                f"--since @{since:.6f}").stdout
    assert "Connection from" not in log and "Accepted" not in log, log


def test_a_killed_apt_is_said_to_be_killed_not_a_package_name_problem(lab, fresh_host, tmp_path):
    """apt-get SIGKILLed mid-run (what the OOM killer does) exits 137: the fix says killed, not "package names"."""
    from tests.faults.helpers import start_provision, wait_inside

    (fresh_host.root / "etc/apt/apt.conf.d/99slow").write_text('APT::Update::Pre-Invoke {"sleep 27.5";};\n')
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - name: pkg\n    packages: {names: [hello], cache_valid_time: 0}\n")
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    process = start_provision(inventory, playbook, tmp_path / "r.json")
    try:
        assert wait_inside(fresh_host, "ps -eo args", "sleep 27.5", timeout=120), "apt-get update never ran"
        assert fresh_host.run_inside("pkill -KILL -x apt-get").returncode == 0
        output, _ = process.communicate(timeout=120)
    finally:
        (fresh_host.root / "etc/apt/apt.conf.d/99slow").unlink()
        process.kill()
    said = " ".join(output.split())
    assert process.returncode == 1, output
    assert "exit 137" in said and "the command was killed (exit 137: SIGKILL)" in said, output
    assert "out-of-memory killer" in said and "check the package names" not in said


def test_a_refused_lab_up_leaves_no_folder_or_key(lab):
    """lab-up on a subnet another lab uses is refused (exit 2) before anything of the new lab exists."""
    from gpunode.lab.lab import lab_root

    folder = lab_root() / "t27r"
    assert not folder.exists()
    result = run_cli("lab-up", "--tag", "t27r", "--hosts", "1", "--subnet", str(lab.network.subnet))
    assert result.code == 2 and "is already used by" in result.stderr, result.output
    assert not folder.exists(), list(folder.iterdir())


def test_a_toolkit_that_cannot_be_fetched_names_the_playbook_variable(lab, fresh_host, tmp_path):
    """NVIDIA's repository is unreachable from the lab: the fix names gpu-node's container_toolkit_repo."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - container_toolkit: {repo_url: 'http://127.0.0.1:9/libnvidia-container'}\n")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--log-dir", str(tmp_path / "l"))
    said = " ".join(result.output.split())
    assert result.code == 1, result.output
    assert "the variable container_toolkit_repo of the gpu-node playbook" in said, result.output
    assert "http://127.0.0.1:9/libnvidia-container" in said


def test_verify_gpu_remedy_never_names_a_headers_package_that_does_not_exist(lab, fresh_host, tmp_path):
    """The lab's running kernel is the lab machine's, for which Debian has no headers package (the kernel step
    says so): with a driver module built for a Debian kernel (dkms status as the DKMS build leaves it, here from a
    stand-in `dkms`), verify-gpu's remedy says to boot that kernel, not to install linux-headers-<running>."""
    import json

    kernel = fresh_host.run_inside("uname -r").stdout.strip()
    fresh_host.run_inside("ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || apt-get update -qq", timeout=300)
    (fresh_host.root / "usr/sbin/dkms").write_text(
        "#!/bin/sh\necho 'nvidia-current/535.247.01, 6.1.0-41-cloud-amd64, x86_64: installed'\n")
    (fresh_host.root / "usr/sbin/dkms").chmod(0o755)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("verify-gpu", "-i", str(inventory), "all", "--json")
    report = json.loads(result.stdout)
    finding = next(f for f in report["findings"] if f["id"] == "dkms-built-other-kernel")
    assert f"linux-headers-{kernel}" not in finding["remedy"].replace(f"package linux-headers-{kernel}", "")
    assert "Boot the kernel the module was built for (6.1.0-41-cloud-amd64)" in finding["remedy"]
    assert f"apt knows no package linux-headers-{kernel}" in finding["evidence"]
