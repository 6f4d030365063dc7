"""Ctrl-C while a big file is on its way to the host: the old file stays, whole; nothing is left behind.

(Ctrl-C during a command step, and the lock released afterwards, is tests/test_lab_runs.py
`test_ctrl_c_stops_cleanly_and_releases_the_remote_lock`.)
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, host_inventory
from tests.faults.big_write_driver import big_content
from tests.faults.helpers import lock_is_free

pytestmark = pytest.mark.lab

SIZE = 24 * 2**20
TARGET = "/root/big.conf"
OLD = "old content\n"


def test_ctrl_c_during_a_big_file_upload_leaves_the_old_file_whole(lab, fresh_host, tmp_path):
    """Guards: scripts/atomic_write.sh checks the sha256 of what arrived against the planned content before the
    rename (and its trap, PIPE included, removes the temp file). When Ctrl-C closes the channel, the remote
    `cat` just sees end of input: without the check the truncated upload would be renamed into place."""
    (fresh_host.root / TARGET.lstrip("/")).write_text(OLD)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests/faults/big_write_driver.py"), str(inventory), TARGET, str(SIZE),
         str(report)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = 0
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline and process.poll() is None:
        sizes = fresh_host.run_inside("stat -c %s /root/.big.conf.gpunode.* 2>/dev/null").stdout.split()
        seen = int(sizes[0]) if sizes else 0
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert 0 < seen < len(big_content(SIZE)), f"the interrupt did not land during the upload ({seen} bytes seen)"
    host = json.loads(report.read_text())["hosts"][0]
    assert host["status"] == "cancelled", output
    leftovers = "ls -A /root | grep -c '^\\.big\\.conf\\.gpunode\\.\\|gpunode.bak$'"
    deadline = time.monotonic() + 15  # the remote script finishes on its own once its input ends
    while fresh_host.run_inside(leftovers).stdout.strip() != "0" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert fresh_host.run_inside(leftovers).stdout.strip() == "0"  # no temp file, no backup: nothing was replaced
    written = (fresh_host.root / TARGET.lstrip("/")).read_bytes()
    assert hashlib.sha256(written).hexdigest() == hashlib.sha256(OLD.encode()).hexdigest(), (
        f"{TARGET} is {len(written)} bytes, not the old file")
    assert lock_is_free(fresh_host)
