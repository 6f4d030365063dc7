"""A full disk under a command that reads its input (issue 37): the host's own words come back, not "the SSH
connection broke ... the host may have rebooted".

When the remote command ends before it has read its input (`cat > file` on a full disk), sending the rest fails on
the controller. That used to be taken for a lost connection and the host's stderr was dropped. Guards:
gpunode/connection/ssh.py `_send_input` (the command's own exit status and stderr are collected), gpunode/errors.py
`disk_full_fix` (the fix names the full folder), gpunode/modcache/remote.py `_received` (where the package did not
fit, with the free space).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.ready import HELLO_PLAYBOOK, prepare_hello
from tests.conftest import REPO, host_inventory, run_cli

pytestmark = pytest.mark.lab
FULL = "/srv/full"
SIZE = 16 * 2**20  # well beyond what the SSH channel's window takes before the remote end stops reading


def _fill(host, folder: str) -> None:
    """A 64 KiB tmpfs at `folder`, filled up."""
    result = host.run_inside(f"mkdir -p {folder} && mount -t tmpfs -o size=64k tmpfs {folder} && "
                             f"(dd if=/dev/zero of={folder}/filler bs=4k 2>/dev/null; true)")
    assert result.returncode == 0, result.stderr


def test_a_big_write_onto_a_full_disk_says_disk_full_with_the_hosts_stderr(lab, fresh_host, tmp_path):
    _fill(fresh_host, FULL)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    run = subprocess.run([sys.executable, str(REPO / "tests/faults/big_write_driver.py"), str(inventory),
                          f"{FULL}/big.conf", str(SIZE), str(report)], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    host = json.loads(report.read_text())["hosts"][0]
    assert run.returncode == 1 and host["status"] == "failed", run.stdout + run.stderr
    said = f"{host['error']}\n{host['fix']}"
    assert "No space left on device" in said and "connection" not in host["error"], said
    assert "out of disk space" in host["fix"] and f"df -h {FULL}" in host["fix"], said
    assert fresh_host.run_inside(f"ls -A {FULL}").stdout.split() == ["filler"]  # the temp file went with its trap


@pytest.mark.slow  # dkms and a cloud kernel's headers from the mirror: 40-90 s
def test_tmp_full_during_the_module_cache_install_names_tmp(lab, fresh_host, tmp_path):
    """The hello module (tests/data/dkms-hello) built once and cached, removed, then installed from the cache with
    /tmp full: the step fails with where the package did not fit; a rerun with space installs it."""
    kernel = prepare_hello(fresh_host)
    playbook = tmp_path / "hello.yml"
    playbook.write_text(HELLO_PLAYBOOK)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")

    def provision(report):
        return run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var",
                       f"hello_kernel={kernel}", "--var", f"module_cache={tmp_path / 'cache'}", "--json-report",
                       str(report), timeout=900)

    assert provision(tmp_path / "r1.json").code == 0
    removed = fresh_host.run_inside(f"dkms remove gpunode-hello/1.0 -k {kernel} && "
                                    f"dpkg -r gpunode-dkms-gpunode-hello-{kernel}")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    _fill(fresh_host, "/tmp")
    try:
        full = provision(tmp_path / "r2.json")
        host = json.loads((tmp_path / "r2.json").read_text())["hosts"][0]
        said = f"{host['error']}\n{host['fix']}"
        assert full.code == 1 and "the package could not be stored in '/tmp/" in host["error"], said
        assert "out of disk space" in host["fix"] and "df -h /tmp" in host["fix"], said
    finally:
        fresh_host.run_inside("umount /tmp")
    assert provision(tmp_path / "r3.json").code == 0
