"""nvidia_driver fetches over https with curl (the runfile, cuda-repo's keyring package on apt): a minimal image
without curl or CA certificates failed there with exit 127; the plan installs them first when missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpunode.steps.nvidia_install import curl_first
from gpunode.steps.pkgmgr import manager_for
from tests.plan_cases import build_facts, find_case, run_case


@pytest.mark.parametrize("case", ["ubuntu2204-cuda-repo-fresh", "ubuntu2204-runfile-fresh", "rocky9-runfile-fresh"])
def test_curl_and_ca_certificates_come_before_curl(case: str) -> None:
    planned = run_case(find_case("nvidia_driver", case))
    command = next(a["command"] for a in planned["actions"] if "curl -fsSL" in (a["command"] or ""))
    assert "command -v curl" in command and "install -- curl ca-certificates" in command, command
    assert command.index("install -- curl ca-certificates") < command.index("curl -fsSL"), command


@pytest.mark.parametrize(("have_curl", "installs"), [(False, True), (True, False)])
def test_the_guard_installs_only_what_is_missing(tmp_path: Path, have_curl: bool, installs: bool) -> None:
    """The guard run by bash with stub commands: no curl -> apt-get installs curl and ca-certificates."""
    facts = build_facts("ubuntu-22.04.txt", {})
    if not Path("/etc/ssl/certs/ca-certificates.crt").is_file():
        pytest.skip("this machine has no /etc/ssl/certs/ca-certificates.crt for the 'present' case")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    stubs = {"apt-get": f'echo "apt-get $*" >> {log}', **({"curl": "exit 0"} if have_curl else {})}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    bash = "/bin/bash"
    subprocess.run([bash, "-c", curl_first(facts, manager_for("apt"))], check=True,
                   env={**os.environ, "PATH": str(bin_dir)})
    text = log.read_text() if log.exists() else ""
    assert ("install -- curl ca-certificates" in text) == installs, text
