"""First boot where the node's `python3` is older than gpunode's minimum (issue 26), on real lab hosts.

AWS's "Python in AL2023" (gpunode/image/interpreter.py AL2023_PYTHON, https://docs.amazonaws.cn/en_us/linux/al2023/ug/
python.md): `/usr/bin/python3` is 3.9 for the life of AL2023, and newer Pythons are separate packages whose binaries
are `/usr/bin/python3.11` ... beside it. The lab cannot boot AL2023, so two real Debian hosts stand in:
- a Debian 12 host given that exact layout: `/usr/bin/python3` is Debian 11's real CPython 3.9 (its binary and
  standard library copied from the lab's bullseye rootfs; it links only libc, libexpat and zlib, which Debian 12 has),
  `/usr/bin/python3.11` is Debian 12's own. The first-boot script must pick python3.11 and converge;
- a Debian 11 (bullseye) host as the mirror ships it: python3 is 3.9 and no Python 3.11 package exists, so the script
  must try the distribution, then stop with exit code 3, a `failed` marker and a message naming Python 3.11.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpunode.image.interpreter import NO_PYTHON_EXIT
from gpunode.lab.rootfs import ensure_rootfs
from tests.conftest import run_cli
from tests.test_user_data_lab import PRESENT_PACKAGES, offline

pytestmark = pytest.mark.lab
STATE = "/var/lib/gpunode/first-boot"


def user_data(tmp_path: Path) -> bytes:
    script = tmp_path / "user-data.sh"
    made = run_cli("user-data", "--playbook", "playbooks/base.yml", "--var", PRESENT_PACKAGES,
                   "--output", str(script))
    assert made.code == 0, made.output
    return script.read_bytes()


def give_old_system_python(host) -> None:
    """/usr/bin/python3 -> Debian 11's CPython 3.9, as AL2023's /usr/bin/python3 -> python3.9."""
    bullseye = ensure_rootfs(suite="bullseye")
    shutil.copy2(bullseye / "usr/bin/python3.9", host.root / "usr/bin/python3.9")
    shutil.copytree(bullseye / "usr/lib/python3.9", host.root / "usr/lib/python3.9", symlinks=True)
    host.run_inside("ln -sf python3.9 /usr/bin/python3")


def test_a_node_whose_python3_is_39_runs_the_bundle_with_python311(lab, fresh_host, tmp_path: Path) -> None:
    give_old_system_python(fresh_host)
    system = fresh_host.run_inside("readlink /usr/bin/python3; /usr/bin/python3 -c 'import sys; print(sys.version)'")
    assert system.stdout.startswith("python3.9\n3.9."), system.stdout + system.stderr
    assert fresh_host.run_inside("/usr/bin/python3.11 -V").stdout.startswith("Python 3.11.")

    (fresh_host.root / "root" / "user-data.sh").write_bytes(user_data(tmp_path))
    with offline(lab, fresh_host):
        run = fresh_host.run_inside("bash /root/user-data.sh", timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "gpunode first boot: Python 3.11." in run.stdout and "(/usr/bin/python3.11)" in run.stdout
    assert "gpunode first boot: ok" in run.stdout
    assert fresh_host.run_inside(f"cat {STATE}/status").stdout.strip() == "ok"
    result = json.loads(fresh_host.run_inside(f"cat {STATE}/result.json").stdout)
    assert result["status"] == "ok" and result["provision_exit"] == 0
    # the system python3 was left as it was (AWS: do not change what /usr/bin/python3 points to)
    assert fresh_host.run_inside("readlink /usr/bin/python3").stdout.strip() == "python3.9"


def test_bullseye_without_a_python311_package_stops_with_exit_3_and_says_why(lab, new_host, tmp_path: Path) -> None:
    host = new_host("bullseye")
    assert host.run_inside("python3 -c 'import sys; print(sys.version)'").stdout.startswith("3.9.")
    (host.root / "root" / "user-data.sh").write_bytes(user_data(tmp_path))
    run = host.run_inside("bash /root/user-data.sh", timeout=600)  # online: apt may look for python3.11
    assert run.returncode == NO_PYTHON_EXIT, run.stdout[-3000:] + run.stderr[-2000:]
    assert "/usr/bin/python3 is Python 3.9, not 3.11" in run.stdout
    assert "installing python3.11 from the distribution" in run.stdout
    assert "FAILED: no Python 3.11 on this node and none could be installed" in run.stdout
    assert host.run_inside(f"cat {STATE}/status").stdout.strip() == "failed"
    result = json.loads(host.run_inside(f"cat {STATE}/result.json").stdout)  # written by the node's python3 3.9
    assert result["status"] == "failed" and result["provision_exit"] is None
    assert "no Python 3.11" in host.run_inside("cat /var/log/gpunode-first-boot.log").stdout
