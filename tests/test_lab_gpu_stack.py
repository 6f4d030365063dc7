"""gpu-node.yml on real lab hosts: Debian 12 packages, a real DKMS build, honest about the lab's kernel."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab
NO_TOOLKIT = ("--var", "install_container_toolkit=false")  # NVIDIA's repository is not reachable from here


def gpu_node(inventory, *args, report=None):
    extra = ("--json-report", str(report)) if report else ()
    return run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/gpu-node.yml", *args, *extra,
                   timeout=1800)


def test_without_upgrade_policy_missing_headers_stop_everything(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = gpu_node(inventory, report=tmp_path / "r.json")
    assert result.code == 1, result.output
    host = json.loads((tmp_path / "r.json").read_text())["hosts"][0]
    assert host["failed_step"] == "kernel headers"
    assert f"running kernel {os.uname().release}" in host["error"]
    assert "headers that exist: linux-headers-" in host["error"]
    assert "kernel_policy: upgrade" in host["fix"]
    assert [s["status"] for s in host["steps"]] == ["ok", "failed"]
    installed = fresh_host.run_inside("dpkg-query -W -f='${Package} ' nvidia-kernel-dkms docker.io 2>/dev/null; true")
    assert installed.stdout.strip() == ""


def test_check_mode_lists_every_change_and_changes_nothing(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = gpu_node(inventory, "--check", "--var", "kernel_policy=upgrade")
    assert result.code == 0, result.output
    out = result.stdout
    for expected in ("linux-image-cloud-amd64", "nvidia-kernel-dkms", "firmware-nvidia-gsp", "docker.io",
                     "/etc/modprobe.d/blacklist-nouveau.conf", "+blacklist nouveau", "/etc/docker/daemon.json",
                     '+            "path": "nvidia-container-runtime"', "nvidia-container-toolkit.list",
                     "enable docker", "enable nvidia-persistenced", "hold nvidia-kernel-dkms"):
        assert expected in out, expected
    unchanged = fresh_host.run_inside(
        "ls /etc/modprobe.d/blacklist-nouveau.conf /etc/docker/daemon.json 2>/dev/null; "
        "dpkg-query -W -f='${Package} ' docker.io nvidia-kernel-dkms 2>/dev/null; true")
    assert unchanged.stdout.strip() == ""


RUNTIME_ONLY = "steps:\n  - container_runtime: {containerd: 'no', default_runtime: true}\n"


def test_daemon_json_keeps_user_keys_and_malformed_is_not_overwritten(lab, fresh_host, tmp_path):
    playbook = tmp_path / "runtime.yml"
    playbook.write_text(RUNTIME_ONLY)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    daemon = fresh_host.root / "etc/docker/daemon.json"
    daemon.parent.mkdir(parents=True, exist_ok=True)
    daemon.write_text('{"log-driver": "json-file", "log-opts": {"max-size": "100m"},\n'
                      ' "registry-mirrors": ["https://mirror.example.com"]}\n')
    first = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook))
    assert first.code == 0, first.output
    merged = json.loads(daemon.read_text())
    assert merged["log-driver"] == "json-file" and merged["log-opts"] == {"max-size": "100m"}
    assert merged["registry-mirrors"] == ["https://mirror.example.com"]
    assert merged["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert merged["default-runtime"] == "nvidia"
    assert list(daemon.parent.glob("daemon.json.*.gpunode.bak"))
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                    str(tmp_path / "r.json"))
    assert again.code == 0, again.output
    assert json.loads((tmp_path / "r.json").read_text())["hosts"][0]["changed"] == 0

    broken = '{"log-driver": "json-file",\n  "registry-mirrors": ["https://mirror.example.com"\n}\n'
    daemon.write_text(broken)
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook))
    assert result.code == 1
    assert "/etc/docker/daemon.json is not valid JSON (line 3" in result.stdout
    assert daemon.read_text() == broken


@pytest.mark.slow
def test_upgrade_defer_builds_the_driver_for_the_next_kernel(lab, fresh_host, tmp_path):
    """About 6 minutes: a real Debian kernel + headers and a real DKMS build of the nvidia module."""
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    first = gpu_node(inventory, "--var", "kernel_policy=upgrade", "--var", "reboot=defer", *NO_TOOLKIT,
                     report=tmp_path / "first.json")
    assert first.code == 0, first.output
    host = json.loads((tmp_path / "first.json").read_text())["hosts"][0]
    assert any("reboot pending" in note for note in host["notes"]), host["notes"]
    kernel = fresh_host.run_inside("ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1").stdout.strip()
    assert kernel.startswith("6.1.0-") and kernel.endswith("-cloud-amd64")
    dkms = fresh_host.run_inside("dkms status").stdout
    assert "nvidia-current/535" in dkms and f"{kernel}, x86_64: installed" in dkms, dkms
    image = fresh_host.run_inside(f"lsinitramfs /boot/initrd.img-{kernel}").stdout.split()
    assert "etc/modprobe.d/blacklist-nouveau.conf" in image  # the driver install's own generation carried it in
    held = fresh_host.run_inside("apt-mark showhold").stdout.split()
    assert "nvidia-kernel-dkms" in held and "libnvidia-ml1" in held
    assert json.loads((fresh_host.root / "etc/docker/daemon.json").read_text())["runtimes"]["nvidia"]
    assert fresh_host.run_inside("systemctl is-active docker").stdout.strip() == "active"

    second = gpu_node(inventory, "--var", "kernel_policy=upgrade", "--var", "reboot=defer", *NO_TOOLKIT,
                      report=tmp_path / "second.json")
    assert second.code == 0, second.output
    assert json.loads((tmp_path / "second.json").read_text())["hosts"][0]["changed"] == 0

    verify = run_cli("verify-gpu", "-i", str(inventory), fresh_host.name, "--json")
    assert verify.code == 1
    findings = {f["id"]: f for f in json.loads(verify.stdout)["findings"]}
    assert "no-nvidia-gpu" in findings
    assert "dkms-built-other-kernel" in findings and kernel in findings["dkms-built-other-kernel"]["evidence"]
    # the same host's `collect` bundle, diagnosed: the same findings and remedies (issue 37: the bundle's remedy
    # named a headers package that does not exist)
    bundle = run_cli("collect", "-i", str(inventory), fresh_host.name, "--output", str(tmp_path / "bundle"))
    assert bundle.code == 0, bundle.output
    diagnosed = run_cli("diagnose", bundle.stdout.strip().splitlines()[-1], "--json")
    from_bundle = {f["id"]: (f["severity"], f["remedy"]) for f in json.loads(diagnosed.stdout)["findings"]}
    assert from_bundle == {i: (f["severity"], f["remedy"]) for i, f in findings.items()}, diagnosed.stdout

    now = gpu_node(inventory, "--var", "kernel_policy=upgrade", "--var", "reboot=now", *NO_TOOLKIT,
                   report=tmp_path / "now.json")
    assert now.code == 1
    host = json.loads((tmp_path / "now.json").read_text())["hosts"][0]
    assert host["failed_step"] == "reboot into the new kernel / without nouveau"
    assert f"the running kernel is still {os.uname().release}, not {kernel}" in host["error"]
