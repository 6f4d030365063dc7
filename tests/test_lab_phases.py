"""Time to ready by phase on a real lab host (issue 40): the kernel step installs Debian 12's cloud kernel; its
initramfs image is generated once (not once by the kernel's hook and again by the initramfs-tools trigger), the
generation is timed from the host's own output, and the report's phases say so. What the host says is read from
the host: lsinitramfs lists the image, dpkg --verify finds initramfs-tools' conffile as shipped (the pause line
gpunode added during the install is gone)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

PLAYBOOK = """steps:
  - name: kernel headers
    kernel_headers: {policy: upgrade}
"""


@pytest.mark.slow  # 38 s with the lab session's start on a quiet machine, 2.5 min with other sessions busy
def test_kernel_install_one_generation_timed(lab, fresh_host, tmp_path):
    playbook = tmp_path / "kernel.yml"
    playbook.write_text(PLAYBOOK)
    report = tmp_path / "report.json"
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report", str(report))
    assert result.code == 0, result.output
    (host,) = json.loads(report.read_text())["hosts"]
    generations = [t for t in host["timed"] if t["kind"] == "initramfs"]
    assert len(generations) == 1, host["timed"]
    image = generations[0]["what"]
    assert image.startswith("/boot/initrd.img-") and generations[0]["seconds"] > 0.5
    assert host["phase_times"]["initramfs"] == pytest.approx(generations[0]["seconds"], abs=0.01)
    assert host["phase_times"]["kernel and headers"] > 1.0
    assert "phases (1 initramfs generation): kernel and headers" in result.output
    listed = fresh_host.run_inside(f"lsinitramfs {image} | grep -c '^usr/lib/modules/\\|^lib/modules/'")
    assert int(listed.stdout.strip() or 0) > 10, listed.stdout + listed.stderr
    verify = fresh_host.run_inside("dpkg --verify initramfs-tools; grep -c gpunode "
                                   "/etc/initramfs-tools/update-initramfs.conf")
    assert verify.stdout.strip() == "0", verify.stdout + verify.stderr
