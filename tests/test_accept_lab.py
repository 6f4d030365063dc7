"""`gpunode accept` over real SSH on a lab host (Debian, no GPU) with Debian's own libcuda1 installed: the probe
loads the real driver library, every entry point it binds resolves, and cuInit answers as the driver does on a
machine without a GPU. (First seen by hand on 2026-11-29: libcuda1 535.309.01-0+deb12u1, cuInit ->
CUDA_ERROR_NO_DEVICE.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab


def _ssh(lab, host, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-i", str(lab.key_path), "-o", f"UserKnownHostsFile={lab.known_hosts_path}",
                           "-o", "BatchMode=yes", f"gpunode@{host.address}", command],
                          capture_output=True, text=True, timeout=600)


def test_real_libcuda_without_a_gpu_gives_the_real_cuinit_error(lab, fresh_host, tmp_path: Path) -> None:
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inventory.yml")
    before = run_cli("accept", "-i", str(inventory), fresh_host.name, "--json", timeout=300)
    assert before.code == 1, before.output
    cuda = [c for c in json.loads(before.stdout)["node"]["checks"] if c["name"] == "cuda"][0]
    assert cuda["findings"][0]["id"] == "libcuda-missing"

    install = _ssh(lab, fresh_host, "sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get "
                   "install -y -q --no-install-recommends libcuda1 && dpkg-query -W libcuda1")
    assert install.returncode == 0, install.stdout + install.stderr

    after = run_cli("accept", "-i", str(inventory), fresh_host.name, "--json", timeout=300)
    assert after.code == 1, after.output
    data = json.loads(after.stdout)
    cuda = [c for c in data["node"]["checks"] if c["name"] == "cuda"][0]
    probe = cuda["measurements"]["probe"]
    assert "load_error" not in probe, probe  # every cuda.h entry point the probe binds exists in the real library
    assert probe["init_error"] == {"call": "cuInit", "code": 100, "name": "CUDA_ERROR_NO_DEVICE"}
    assert cuda["findings"][0]["summary"] == "CUDA: cuInit returned CUDA_ERROR_NO_DEVICE"
    assert {f["id"] for f in data["findings"]} >= {"nvidia-smi-missing", "cuda-init"}
