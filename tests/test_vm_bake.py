"""Issue #6 in the opt-in VM suite: `build-image --builder qemu` bakes the GPU node playbook into a qcow2, and a VM
booted from it has the provisioned state.

The base is the lab's stand-in for Debian's genericcloud image (`gpunode/lab/cloud_image.py`: GRUB, cloud-init,
the `debian` user). Real Packer (Debian's 1.6.6, qemu builder under TCG) boots it with a NoCloud seed it serves
over HTTP; gpunode provisions it (headers, NVIDIA 535 built with DKMS, Docker, nvidia runtime), cleans and
validates it. Then the result boots as a new instance on the lab's bridge (its own GRUB and kernel, a new
cloud-init seed) and is checked from inside. 45-55 minutes on 2 cores under TCG, most of them the DKMS
build; the reboot test alone (`-k reboot`) 2-4.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.image_support import REBOOT_PLAYBOOK
from tests.vm_support import require_vms, timings_reporter

pytestmark = [pytest.mark.vm, pytest.mark.slow]

VM_INDEX = 101  # address .111 on the lab subnet (the other VM suite uses .110)
PLAYBOOK_VARS = ("kernel_policy=upgrade", "reboot=defer", "install_container_toolkit=false")
TIMINGS: dict[str, float] = {}


def var_args(names: tuple[str, ...]) -> list[str]:
    return [arg for var in names for arg in ("--var", var)]


@pytest.fixture(scope="module")
def baked(request, tmp_path_factory) -> dict:
    """One qemu build of playbooks/gpu-node.yml: its CLI result, build folder, report and image record."""
    from gpunode.lab.cloud_image import ensure_cloud_image

    require_vms()
    request.addfinalizer(timings_reporter(request, TIMINGS, "vm bake"))
    started = time.monotonic()
    base = ensure_cloud_image()
    TIMINGS["cloud base image ready (built once, then cached)"] = time.monotonic() - started
    builds = tmp_path_factory.mktemp("builds")
    started = time.monotonic()
    result = run_cli("build-image", "--builder", "qemu", "--base", "debian-12", "--source-image", str(base),
                     "--playbook", "playbooks/gpu-node.yml", *var_args(PLAYBOOK_VARS),
                     "--packer-var", "accelerator=tcg", "--packer-var", "disk_size=8G",
                     "--packer-var", "memory_mb=3072", env={"GPUNODE_BUILDS": str(builds)}, timeout=5400)
    TIMINGS["build-image --builder qemu"] = time.monotonic() - started
    folders = list(builds.iterdir())
    assert len(folders) == 1, result.output
    build_dir = folders[0]
    report = json.loads((build_dir / "report.json").read_text()) if (build_dir / "report.json").exists() else {}
    record = json.loads((build_dir / "image.json").read_text()) if (build_dir / "image.json").exists() else {}
    return {"result": result, "dir": build_dir, "report": report, "record": record, "base": base}


def test_build_image_qemu_bakes_a_cleaned_validated_qcow2(baked):
    result, report, record = baked["result"], baked["report"], baked["record"]
    assert result.code == 0, f"{result.output[-6000:]}\nconsole:\n{console_tail(baked['dir'])}"
    assert report["ok"] is True and report["phase"] == "done", report

    image = Path(record["image_id"])
    assert image.parent == baked["dir"] / "output" and image.suffix == ".qcow2"
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(image)], capture_output=True,
                                     text=True, check=True).stdout)
    assert info["format"] == "qcow2" and "backing-filename" not in info  # self-contained, not an overlay
    assert info["virtual-size"] == 8 * 2**30

    tags = record["tags"]
    assert re.fullmatch(r"535\.\d+\.\d+", tags["gpunode:driver"]), tags
    assert re.fullmatch(r"6\.1\.0-\d+-cloud-amd64", tags["gpunode:kernel"]), tags
    assert tags["gpunode:os"] == "debian-12" and tags["gpunode:base"] == "debian-12"
    assert tags["gpunode:playbook"] == "gpu-node.yml"
    assert tags["gpunode:verify"] == "not run: no NVIDIA GPU on the instance"
    assert tags["gpunode:docker"] != "none"

    provision = report["runs"]["provision"]["hosts"][0]
    statuses = {s["name"]: s["status"] for s in provision["steps"]}
    assert statuses["NVIDIA driver"] == "changed" and statuses["Docker"] == "changed", statuses
    assert statuses["NVIDIA container toolkit"] == "skipped", statuses
    finalize = report["runs"]["finalize"]["hosts"][0]
    assert [(s["kind"], s["status"]) for s in finalize["steps"]] == [
        ("ecs_gpu_support", "skipped"), ("accept_at_boot", "changed"), ("image_cleanup", "changed"),
        ("image_validate", "ok"), ("command", "changed")]  # not a Batch image; gpu-node installed the acceptance
    # program, so its boot unit is written; the last one powers off
    assert "gpunode: the build VM powered off" in result.output
    notes = finalize["steps"][2]["message"]
    assert f"nvidia modules built for the boot kernel {tags['gpunode:kernel']}" in notes, notes
    assert "NVIDIA driver packages all on 535." in notes, notes

    base = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(baked["base"])], capture_output=True,
                                     text=True, check=True).stdout)
    assert base["virtual-size"] == 3 * 2**30 + 2**20  # Packer worked on a copy: the cached base is untouched


@pytest.fixture(scope="module")
def booted(baked, lab):
    """A new instance of the baked image on the lab's bridge: its own GRUB and kernel, a new cloud-init seed."""
    from gpunode.lab.vm import VmHost
    from gpunode.lab.vm_image import VmImage

    if baked["result"].code != 0:
        pytest.skip("the bake failed (see the test above)")
    vm = VmHost.on_lab(lab.network, lab.directory, VM_INDEX, VmImage(disk=Path(baked["record"]["image_id"])),
                       lab.key_path)
    try:
        vm.start()
        TIMINGS["boot of the baked image to SSH"] = vm.wait_for_ssh(timeout=600)
        yield vm
    finally:
        vm.destroy()


def inside(vm, command: str) -> str:
    result = vm.ssh(command, timeout=180)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout.strip()


def test_a_vm_booted_from_the_image_has_the_provisioned_state(baked, booted, tmp_path):
    vm, tags = booted, baked["record"]["tags"]
    kernel, driver = tags["gpunode:kernel"], tags["gpunode:driver"]
    inside(vm, "cloud-init status --wait >/dev/null; true")

    assert inside(vm, "uname -r") == kernel  # GRUB booted the kernel the driver was built for
    assert re.search(rf"nvidia-current/{re.escape(driver)}, {re.escape(kernel)}, x86_64: installed",
                     inside(vm, f"dkms status -k {kernel}"))
    assert inside(vm, "modinfo -F version nvidia-current") == driver  # the module exists for the running kernel
    assert "nvidia-kernel-dkms" in inside(vm, "dpkg --get-selections | awk '$2 == \"hold\" {print $1}'").split()
    assert inside(vm, "systemctl is-active docker") == "active"
    daemon = json.loads(inside(vm, "cat /etc/docker/daemon.json"))
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"

    # a new instance: a new machine id, cloud-init ran again (our seed), the build key cannot log in
    assert re.fullmatch(r"[0-9a-f]{32}", inside(vm, "cat /etc/machine-id"))
    assert inside(vm, "cloud-init query instance_id").startswith(vm.name + "-")
    build_key = (baked["dir"] / "id_ed25519.pub").read_text().split()[1]
    assert build_key not in inside(vm, "cat /home/debian/.ssh/authorized_keys")
    assert inside(vm, "ls /var/cache/apt/archives/*.deb 2>/dev/null | wc -l") == "0"

    # the static validation, run on the booted instance: the driver is built for the kernel that runs and that
    # will boot; the build leaves nothing behind that a boot cannot bring back
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {vm.name: vm.inventory_entry()}}}))
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump({"name": "validate", "steps": [{"image_validate": {
        "cleaned": ["pkg-cache", "history", "tmp", "build-key"], "require_driver": True,
        "authorized_key": (baked["dir"] / "id_ed25519.pub").read_text().strip()}}]}))
    report_path = tmp_path / "validate.json"
    validation = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                         str(report_path), "--log-dir", str(tmp_path / "logs"), timeout=600)
    assert validation.code == 0, validation.output
    step = json.loads(report_path.read_text())["hosts"][0]["steps"][0]
    assert step["status"] == "ok" and f"nvidia modules built for the boot kernel {kernel}" in step["message"]

    # verify-gpu is honest: the driver is there, the GPU is not
    verify = run_cli("verify-gpu", "-i", str(inventory), vm.name, "--json", timeout=600)
    assert verify.code == 1, verify.output
    findings = {f["id"] for f in json.loads(verify.stdout)["findings"]}
    assert "no-nvidia-gpu" in findings, findings


def test_a_qemu_build_survives_a_reboot_and_powers_off_cleanly(tmp_path):
    """Reboots work in qemu builds too: gpunode reconnects, and at the end powers the VM off itself."""
    from gpunode.lab.cloud_image import ensure_cloud_image

    require_vms()
    playbook = tmp_path / "reboots.yml"
    playbook.write_text(REBOOT_PLAYBOOK)
    builds = tmp_path / "builds"
    builds.mkdir()
    started = time.monotonic()
    result = run_cli("build-image", "--builder", "qemu", "--base", "debian-12", "--source-image",
                     str(ensure_cloud_image()), "--playbook", str(playbook), "--packer-var", "accelerator=tcg",
                     "--packer-var", "disk_size=4G", env={"GPUNODE_BUILDS": str(builds)}, timeout=1800)
    TIMINGS["build-image --builder qemu with a reboot"] = time.monotonic() - started
    (build_dir,) = builds.iterdir()
    assert result.code == 0, f"{result.output[-6000:]}\nconsole:\n{console_tail(build_dir)}"
    runs = json.loads((build_dir / "report.json").read_text())["runs"]
    assert [(s["name"], s["status"]) for s in runs["provision"]["hosts"][0]["steps"]] == [
        ("before", "changed"), ("reboot in the middle", "changed"), ("after", "changed")]
    assert [s["status"] for s in runs["finalize"]["hosts"][0]["steps"]] == ["skipped", "changed", "ok", "changed"]
    console = (build_dir / "console.log").read_text(errors="replace")
    assert console.count("Linux version 6.1.") == 2  # the kernel really booted twice
    assert "gpunode: the build VM powered off" in result.output
    assert console.rstrip().endswith("reboot: Power down"), console_tail(build_dir)  # a clean power-off
    (image,) = (build_dir / "output").glob("*.qcow2")
    check = subprocess.run(["qemu-img", "check", str(image)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def console_tail(build_dir: Path, lines: int = 30) -> str:
    console = build_dir / "console.log"
    if not console.exists():
        return "(no console log)"
    return "\n".join(console.read_text(errors="replace").splitlines()[-lines:])
