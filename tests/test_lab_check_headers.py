"""Check mode predicts the missing-headers failure on a real lab host (its kernel has no Debian headers)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab
STATE = ("dpkg-query -W -f='${Package} ${Version}\\n' | md5sum; ls -A /var/lib/apt/lists /etc/apt/sources.list.d; "
         "ls /var/cache/apt; ls /tmp")


def provision(inventory, report, *args):
    return run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/gpu-node.yml", *args,
                   "--json-report", str(report), timeout=1800)


def test_check_mode_fails_like_the_real_run_and_changes_nothing(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    before = fresh_host.run_inside(STATE).stdout
    check = provision(inventory, tmp_path / "check.json", "--check")
    assert check.code == 1, check.output
    predicted = json.loads((tmp_path / "check.json").read_text())["hosts"][0]
    assert predicted["failed_step"] == "kernel headers"
    assert f"no headers package exists for the running kernel {os.uname().release}" in predicted["error"]
    assert "headers that exist: linux-headers-" in predicted["error"]
    assert fresh_host.run_inside(STATE).stdout == before  # no package, no package list, no cache file

    real = provision(inventory, tmp_path / "real.json")
    assert real.code == 1, real.output
    happened = json.loads((tmp_path / "real.json").read_text())["hosts"][0]
    assert happened["failed_step"] == predicted["failed_step"]
    assert happened["error"] == predicted["error"] and happened["fix"] == predicted["fix"]
