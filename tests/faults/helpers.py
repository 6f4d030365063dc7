"""Shared pieces of the fault tests: start gpunode as a user would, wait for something on a lab host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

# Values that would run a command if a quote broke (harmless: they only create a marker file).
MARKER = "gpunode-injected"
INJECTIONS = [f"$(touch {MARKER})", f"`touch {MARKER}`", f"; touch {MARKER}", f"&& touch {MARKER}",
              f"| touch {MARKER}", f"' ; touch {MARKER} '", f'" ; touch {MARKER} "', "\n", "'", '"', "\\", "$HOME",
              "${IFS}", "*", "~", "-rf", "--", "#", "\t", "!", " ", "$", "&", "<", ">", "(", ")", "/", "../"]


def start_provision(inventory: Path, playbook: Path, report: Path, *extra: str,
                    env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`python -m gpunode provision` in the background, with a JSON report and logs next to the report."""
    argv = [sys.executable, "-m", "gpunode", "provision", "-i", str(inventory), "--playbook", str(playbook),
            "--json-report", str(report), "--log-dir", str(report.with_suffix(".logs")), *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "200", **(env or {})})


def wait_inside(host, command: str, expect: str, timeout: float = 20.0) -> bool:
    """Poll `command` inside a lab host until its output contains `expect`; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if expect in host.run_inside(command).stdout:
            return True
        time.sleep(0.1)
    return False


def wait_for_file_text(path: Path, expect: str, timeout: float = 20.0) -> bool:
    """Poll a local file (e.g. a per-host log) until it contains `expect`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and expect in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def host_report(report: Path) -> dict:
    """The only host of a JSON report."""
    (host,) = json.loads(report.read_text())["hosts"]
    return host


def lock_is_free(host) -> bool:
    """Nobody holds gpunode's run lock on the host."""
    return host.run_inside("flock -n /run/lock/gpunode.lock true && echo free").stdout.strip() == "free"


def wait_lock_free(host, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lock_is_free(host):
            return True
        time.sleep(0.5)
    return False
