"""gpunode as its users get it: the wheel built from this tree, installed into a clean virtualenv, run from a
folder that is not the checkout: `init`, `provision --check` of the new project's site.yml (which includes the
built-in gpu-node) against a lab host, `build-ami --validate-only` of the built-in template, `diagnose`, invoke.

About a minute: the wheel build (~10 s) and the virtualenv's dependencies (pip's cache makes them quick)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, REQUIRE_LAB, CliResult

pytestmark = pytest.mark.lab
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".gpunode", ".*_cache")
# what the driver's error looks like when the module is not loaded (a real capture's text; `diagnose` reads files)
SMI_ERROR = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with only the wheel (and its dependencies) installed; returns its bin folder."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=SKIP)  # a clean tree: no stale build/ in the wheel
    pip = [sys.executable, "-m", "pip"]
    built = subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    wheel = next((root / "dist").glob("gpunode-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("gpunode/_playbooks/gpu-node.yml", "gpunode/_playbooks/base.yml", "gpunode/_playbooks/nfs.yml",
                    "gpunode/_playbooks/image-finalize.yml", "gpunode/_packer/aws.pkr.hcl",
                    "gpunode/_packer/qemu.pkr.hcl", "gpunode/_packer/build.pkr.hcl.in", "gpunode/_scripts/facts.sh",
                    "gpunode/parsers/catalogs/messages/nvml.yaml"):
        assert shipped in names, shipped
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    bin_dir = root / "venv" / "bin"
    install = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    return bin_dir


def run(bin_dir: Path, cwd: Path, *args: str, program: str = "gpunode") -> CliResult:
    """The installed console script, from `cwd`, with nothing of the checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", COLUMNS="200")
    result = subprocess.run([str(bin_dir / program), *args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=900)
    return CliResult(result.returncode, result.stdout, result.stderr)


def test_the_installed_wheel_works_from_any_folder(installed, lab, fresh_host, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    where = run(installed, work, "-c", "import gpunode; print(gpunode.__file__)", program="python")
    assert where.stdout.startswith(str(installed.parent)), where.output  # the wheel, not the checkout

    from gpunode import __version__
    assert run(installed, work, "--version").stdout.strip() == f"gpunode {__version__}"

    assert run(installed, work, "init", "proj").code == 0
    project = work / "proj"
    # what a user does next: put a node in inventory/hosts, and its settings in host_vars (the lab's kernel has
    # no Debian headers, so this node takes the newest Debian kernel: kernel_policy upgrade)
    (project / "inventory/hosts").write_text(f"[gpu]\n{fresh_host.name} ansible_host={fresh_host.address}\n")
    (project / f"inventory/host_vars/{fresh_host.name}.yml").write_text(
        f"ansible_user: gpunode\nansible_become: true\nansible_ssh_private_key_file: {lab.key_path}\n"
        f"known_hosts: {lab.known_hosts_path}\nkernel_policy: upgrade\n")

    check = run(installed, project, "provision", "-i", "inventory", "--playbook", "site.yml", "--check",
                "--json-report", "plan.json")
    assert check.code == 0, check.output
    for planned in ("linux-image-cloud-amd64", "nvidia-kernel-dkms", "docker.io", "/etc/docker/daemon.json",
                    "htop"):
        assert planned in check.stdout, planned
    steps = json.loads((project / "plan.json").read_text())["hosts"][0]["steps"]
    gpu_node = [s for s in steps if "/_playbooks/gpu-node.yml:" in s["where"]]
    assert gpu_node and all(s["where"].startswith(str(installed.parent)) for s in gpu_node)
    assert {s["status"] for s in gpu_node} >= {"would-change"}
    installed_pkgs = fresh_host.run_inside("dpkg-query -W -f='${Package} ' docker.io htop 2>/dev/null; true")
    assert installed_pkgs.stdout.strip() == ""  # check mode changed nothing

    unknown = run(installed, project, "provision", "-i", "inventory", "--playbook", "gpu-nodes")
    assert unknown.code == 2 and "base, gpu-node, image-finalize, nfs" in " ".join(unknown.stderr.split())

    if shutil.which("packer") or REQUIRE_LAB:
        validate = run(installed, project, "build-ami", "--validate-only")
        assert validate.code == 0, validate.output
        assert "aws.pkr.hcl is valid" in validate.stdout

    (project / "smi-error.txt").write_text(SMI_ERROR)
    diagnosed = run(installed, project, "diagnose", "--file", "smi-error.txt", "--json")
    assert diagnosed.code == 1, diagnosed.output
    assert "driver-not-loaded" in [f["id"] for f in json.loads(diagnosed.stdout)["findings"]]

    listed = run(installed, project, "--list", program="invoke")  # the project's tasks.py, for invoke users
    assert listed.code == 0 and "provision" in listed.stdout, listed.output
