"""`gpunode user-data`: the first-boot script run as root on a fresh lab host, as cloud-init runs user data.

The host has python3 but no pip and none of gpunode's dependencies: everything comes from the embedded bundle.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import host_iptables, run_cli

pytestmark = pytest.mark.lab
# base.yml's packages that the lab rootfs has already: with the host cut off from everything outside the lab subnet,
# no package of any kind can come from the network (only the bundle).
PRESENT_PACKAGES = "base_packages=[ca-certificates, iproute2, sudo]"


def offline(lab, host) -> Iterator[None]:
    """Drop the host's traffic to anything outside the lab subnet, in its network namespace."""
    return host_iptables(lab, host, "OUTPUT", "!", "-d", str(lab.network.subnet), "-j", "DROP")


@contextlib.contextmanager
def serve(directory: Path, address: str) -> Iterator[str]:
    """A one-folder HTTP server on the lab bridge's address (the lab hosts' gateway), for one test."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((address, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _steps(report: dict) -> list[tuple[str, str]]:
    return [(s["name"], s["status"]) for s in report["hosts"][0]["steps"]]


def test_first_boot_script_converges_base_and_leaves_its_marker(lab, fresh_host, tmp_path: Path) -> None:
    script = tmp_path / "user-data.sh"
    made = run_cli("user-data", "--playbook", "playbooks/base.yml", "--var", "journald_max_use=512M",
                   "--var", PRESENT_PACKAGES, "--output", str(script))
    assert made.code == 0, made.output
    assert script.read_text().startswith("#!/bin/bash\n") and "pip" not in script.read_text().split("\n", 3)[2]
    # nothing on the host could install gpunode or its dependencies, and nothing outside the lab is reachable
    bare = fresh_host.run_inside("python3 -c 'import yaml' 2>&1; python3 -m pip --version 2>&1; true").stdout
    assert "No module named 'yaml'" in bare and "No module named pip" in bare

    (fresh_host.root / "root" / "user-data.sh").write_bytes(script.read_bytes())
    with offline(lab, fresh_host):
        first = fresh_host.run_inside("bash /root/user-data.sh", timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert "gpunode first boot: ok" in first.stdout

    state = "/var/lib/gpunode/first-boot"
    assert fresh_host.run_inside(f"cat {state}/status").stdout.strip() == "ok"
    result = json.loads(fresh_host.run_inside(f"cat {state}/result.json").stdout)
    assert result["status"] == "ok" and result["provision_exit"] == 0 and result["playbook"] == "base"
    assert result["verify_exit"] is None  # no NVIDIA device on a lab host: verify-gpu not run
    report = json.loads(fresh_host.run_inside(f"cat {state}/report.json").stdout)
    assert ("cap the systemd journal's disk use", "changed") in _steps(report)
    assert fresh_host.run_inside("grep -c '^SystemMaxUse=512M' /etc/systemd/journald.conf").stdout.strip() == "1"
    assert "gpunode first boot: playbook base" in fresh_host.run_inside("cat /var/log/gpunode-first-boot.log").stdout

    with offline(lab, fresh_host):
        second = fresh_host.run_inside("bash /root/user-data.sh", timeout=900)
    assert second.returncode == 0, second.stdout[-3000:]
    again = json.loads(fresh_host.run_inside(f"cat {state}/report.json").stdout)
    assert {status for _, status in _steps(again)} <= {"ok", "skipped"}, _steps(again)  # nothing changed
    assert fresh_host.run_inside("ls -d /var/lib/gpunode/bundle-* | wc -l").stdout.strip() == "1"  # unpacked once


def test_a_failing_playbook_leaves_a_failed_marker(lab, fresh_host, tmp_path: Path) -> None:
    playbook = tmp_path / "breaks.yml"
    playbook.write_text("name: breaks\nsteps:\n  - name: the step that breaks\n    command: {cmd: 'exit 3'}\n")
    script = tmp_path / "user-data.yaml"
    made = run_cli("user-data", "--playbook", str(playbook), "--format", "cloud-init", "--output", str(script))
    assert made.code == 0, made.output
    import base64

    import yaml

    config = yaml.safe_load(script.read_text())
    assert script.read_text().startswith("#cloud-config\n")
    assert config["runcmd"] == [["bash", "/var/lib/gpunode/first-boot.sh"]]
    body = base64.b64decode(config["write_files"][0]["content"])
    (fresh_host.root / "root" / "first-boot.sh").write_bytes(body)
    run = fresh_host.run_inside("bash /root/first-boot.sh", timeout=900)
    assert run.returncode == 1
    result = json.loads(fresh_host.run_inside("cat /var/lib/gpunode/first-boot/result.json").stdout)
    assert result["status"] == "failed" and result["provision_exit"] == 1


def test_a_bundle_fetched_from_a_url_and_checked(lab, fresh_host, tmp_path: Path) -> None:
    playbook = tmp_path / "tiny.yml"
    playbook.write_text("name: tiny\nsteps:\n  - name: a file\n"
                        "    command: {cmd: 'touch /root/tiny', creates: /root/tiny}\n")
    served = tmp_path / "www"
    served.mkdir()
    with serve(served, lab.network.gateway) as url, offline(lab, fresh_host):
        script = tmp_path / "user-data.sh"
        made = run_cli("user-data", "--playbook", str(playbook), "--bundle-url", f"{url}/bundle.tar.xz",
                       "--bundle-out", str(served / "bundle.tar.xz"), "--output", str(script))
        assert made.code == 0, made.output
        assert len(script.read_bytes()) < 16 * 1024  # fits EC2's and Tencent's user data
        (fresh_host.root / "root" / "user-data.sh").write_bytes(script.read_bytes())
        tampered = served / "bundle.tar.xz"
        good = tampered.read_bytes()
        tampered.write_bytes(good + b"x")
        bad = fresh_host.run_inside("bash /root/user-data.sh", timeout=300)
        assert bad.returncode == 1 and "sha256 is not" in bad.stdout, bad.stdout[-2000:]
        assert fresh_host.run_inside("cat /var/lib/gpunode/first-boot/status").stdout.strip() == "failed"
        tampered.write_bytes(good)
        run = fresh_host.run_inside("bash /root/user-data.sh", timeout=600)
        assert run.returncode == 0, run.stdout[-3000:]
    assert fresh_host.run_inside("test -f /root/tiny && cat /var/lib/gpunode/first-boot/status").stdout.strip() == "ok"


def test_bad_input_exits_2() -> None:
    result = run_cli("user-data", "--format", "ignition")
    assert result.code == 2 and "--format must be shell, cloud-init or mime" in result.output
    result = run_cli("user-data", "--var", "not a pair")
    assert result.code == 2 and "KEY=VALUE" in result.output
    result = run_cli("user-data", "--bundle-url", "ftp://x/b.tar.xz", "--bundle-out", "/tmp/b")
    assert result.code == 2 and "http(s) URL" in result.output


CLOUD_INIT_STAND_IN = """#!/bin/sh
# a cloud-init that has not finished: `status --wait` waits; `modules` runs its user data as a child, as runcmd does
case "$1" in
    status) sleep 600 ;;
    modules) sh /root/wait.sh wait-pm 5; echo "user data exit $?" ;;
esac
"""


def test_the_package_manager_wait_does_not_wait_for_the_cloud_init_that_runs_it(lab, fresh_host) -> None:
    """User data runs inside cloud-init, which finishes only after it: waiting for cloud-init would stall to the
    timeout (found by the VM suite's first boot). Another process on a booting node still waits for cloud-init."""
    from gpunode.scripts import script_text

    (fresh_host.root / "root" / "wait.sh").write_text(script_text("wait_for_package_manager.sh"))
    stand_in = fresh_host.root / "usr" / "local" / "bin" / "cloud-init"
    stand_in.write_text(CLOUD_INIT_STAND_IN)
    stand_in.chmod(0o755)
    fresh_host.run_inside("mkdir -p /run/cloud-init && rm -f /run/cloud-init/result.json")

    inside = fresh_host.run_inside("cloud-init modules --mode final", timeout=120)
    assert "run by cloud-init itself (user data): not waiting for cloud-init to finish" in inside.stdout, inside
    assert "user data exit 0" in inside.stdout, inside.stdout

    outside = fresh_host.run_inside("sh /root/wait.sh wait-pm 5", timeout=120)
    assert outside.returncode == 0 and "waiting for cloud-init to finish" in outside.stdout, outside
