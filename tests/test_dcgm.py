"""The dcgm step's probe run by a real shell (dash, sed, dpkg-query of this Debian machine) over real nvidia-smi
outputs, its plan from what that shell printed, its version pins, and the acceptance runner's remedy for a missing
dcgmi, checked against the CLI and the built-in playbook that carry it out.

The nvidia-smi outputs are captures from real GPUs (tests/data/nvidia/SOURCES.md); no GPU is lent here, so a script
named nvidia-smi prints one of them, and everything after it (the vendor's sed expression, the shell variable, the
dpkg-query the name reaches) is the real program."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.facts import parse_os_release
from gpunode.playbook.load import load_playbook
from gpunode.playbook.tags import select_steps
from gpunode.playbook.template import evaluate
from gpunode.steps import build_step
from gpunode.steps.base import StepFailed
from gpunode.steps.dcgm import pinned_by
from gpunode.steps.probe import ProbeBatch
from tests.plan_cases import context

ROOT = Path(__file__).resolve().parents[1]
NVIDIA = ROOT / "tests" / "data" / "nvidia"
# capture -> the CUDA major its header line prints ("CUDA Version: X.Y"), read off each file by eye
CAPTURES = {
    "csv/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__table.txt": "13",   # CUDA Version: 13.1
    "table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt": "12",                    # CUDA Version: 12.4
    "table/thamada-gls__H100SXMx8__nvidia-smi.txt": "12",                          # CUDA Version: 12.7
    "table/thamada-gls__L4__nvidia-smi.txt": "12",                                 # CUDA Version: 12.4
}
NOT_FOUND = "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\nNeedDaemonReload=no\n"


def _bin(tmp_path: Path, capture: str | None) -> str:
    """A PATH whose nvidia-smi prints `capture` (none: no nvidia-smi at all), then the machine's own tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if capture:
        tool = bin_dir / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\ncat {NVIDIA / capture}\n")
        tool.chmod(0o755)
    return f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"


def _probe_on_this_machine(step_args: dict, path: str, os_name: str = "ubuntu-22.04") -> dict:
    """The step's probe as the runner sends it (one ProbeBatch script through sh), its output split back."""
    case = {"kind": "dcgm", "os": os_name, "args": step_args}
    step = build_step("dcgm", step_args)
    snippets = step.probe(context(case, step=step).facts)
    batch = ProbeBatch([snippets])
    out = subprocess.run(["sh", "-s"], input=batch.script(), capture_output=True, text=True, env={"PATH": path},
                         check=True).stdout
    return dict(batch.split(out, ["dcgm"])[0])


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_the_vendors_sed_reads_the_cuda_major_from_real_nvidia_smi_output(tmp_path: Path, capture: str) -> None:
    header = next(line for line in (NVIDIA / capture).read_text().splitlines() if "CUDA Version:" in line)
    assert re.search(r"CUDA Version: (\d+)\.", header).group(1) == CAPTURES[capture]  # the capture says so
    printed = _probe_on_this_machine({}, _bin(tmp_path, capture))
    assert printed["cuda"] == f"{CAPTURES[capture]}\n"


def test_the_package_asked_of_dpkg_is_the_one_for_that_major(tmp_path: Path) -> None:
    """dash's own trace (-x) of the probe's dpkg-query: the shell variable became the major nvidia-smi printed."""
    step = build_step("dcgm", {})
    facts = context({"kind": "dcgm", "os": "ubuntu-22.04"}, step=step).facts
    snippet = step.probe(facts)["pkgs.installed"]
    traced = subprocess.run(["sh", "-xc", snippet], capture_output=True, text=True,
                            env={"PATH": _bin(tmp_path, next(iter(sorted(CAPTURES))))})
    asked = [line for line in traced.stderr.splitlines() if line.startswith("+ dpkg-query")]
    assert asked and asked[0].endswith("-- datacenter-gpu-manager-4-cuda13 datacenter-gpu-manager-4-core"), \
        traced.stderr


def test_a_plan_from_what_the_shell_printed(tmp_path: Path) -> None:
    """The real probe output (DCGM is not installed on this machine: dpkg-query prints nothing) planned: the cuda13
    package and core, then the service."""
    printed = _probe_on_this_machine({}, _bin(tmp_path, "csv/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
                                                        "__idle__table.txt"))
    assert printed["pkgs.installed"] == ""
    case = {"kind": "dcgm", "os": "ubuntu-22.04", "probe": {**printed, "unit": NOT_FOUND}}
    step = build_step("dcgm", {})
    actions = step.plan(context(case, step=step))
    assert [a.summary for a in actions] == [
        "install DCGM 4 for CUDA 13: datacenter-gpu-manager-4-cuda13, datacenter-gpu-manager-4-core",
        "enable and start nvidia-dcgm"]
    assert actions[0].command.endswith("install -- datacenter-gpu-manager-4-cuda13 datacenter-gpu-manager-4-core; }")


def test_no_nvidia_smi_is_no_driver(tmp_path: Path) -> None:
    printed = _probe_on_this_machine({}, _bin(tmp_path, None))
    assert printed["cuda"] == ""
    case = {"kind": "dcgm", "os": "ubuntu-22.04", "check": False, "probe": {**printed, "unit": NOT_FOUND}}
    step = build_step("dcgm", {})
    with pytest.raises(StepFailed) as failed:
        step.plan(context(case, step=step))
    assert "install the driver first" in failed.value.fix and "cuda_major" in failed.value.fix


@pytest.mark.parametrize(("installed", "version", "ok"), [
    ("1:4.4.2-1", None, True),            # no pin: whatever is installed
    ("1:4.4.2-1", "1:4.4.2-1", True),     # apt, as dpkg prints it
    ("1:4.4.2-1", "4.4.2-1", True),       # the epoch left out of the pin
    ("1:4.4.2-1", "4.4.2", True),         # the upstream version only
    ("4.4.2-1", "4.4.2", True),           # rpm VERSION-RELEASE
    ("4.4.2-1", "4.4.*", True),           # a glob
    ("1:4.5.2-1", "1:4.4.2-1", False),
    ("4.4.20-1", "4.4.2", False),         # another version that starts alike
    (None, None, False),                  # not installed
])
def test_pins(installed: str | None, version: str | None, ok: bool) -> None:
    assert pinned_by(installed, version) is ok


@pytest.mark.parametrize("args", [{"version": "latest; rm -rf /"}, {"cuda_major": 5}])
def test_bad_arguments_are_refused_before_any_host(args: dict) -> None:
    with pytest.raises(ValueError, match="dcgm"):
        build_step("dcgm", args)


def test_the_accept_remedy_runs_the_dcgm_step() -> None:
    """The remedy the acceptance runner itself prints for a missing dcgmi (run here, where DCGM is absent): its
    options exist on `gpunode provision`, and the built-in gpu-node playbook, with that variable and tag, runs the
    dcgm step (and only what is tagged always)."""
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "accept_node.py"), "--tier", "quick"],
                         capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    check = next(c for c in json.loads(ran.stdout)["checks"] if c["name"].startswith("dcgm"))
    assert check["status"] == "not-installed"
    command = re.search(r"`(gpunode provision [^`]+)`", check["reason"]).group(1)
    assert command == "gpunode provision -H HOST --playbook gpu-node --var install_dcgm=true --tags dcgm"
    assert command in " ".join((ROOT / "docs" / "accept.md").read_text().split())
    helptext = subprocess.run([sys.executable, "-m", "gpunode", "provision", "--help"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
    for option in ("-H STRING", "--playbook=STRING", "--var", "--tags"):
        assert option in helptext
    book = select_steps(load_playbook("gpu-node"), ["dcgm"], [])
    kinds = [s.kind for s in book.steps]
    assert kinds == ["wait_for_package_manager", "dcgm"]
    dcgm = book.steps[1]
    assert evaluate(dcgm.when, {**book.vars, "install_dcgm": True}) is True
    assert evaluate(dcgm.when, book.vars) is False  # off unless asked for


def test_supported_distributions_are_those_nvidia_lists() -> None:
    """The adapters refuse what NVIDIA's list leaves out; the EL releases gpunode knows pass."""
    from gpunode.distros import UnsupportedDistro, for_os
    osdir = ROOT / "tests" / "data" / "os-release"
    ok, refused = [], []
    for name in ("ubuntu-22.04", "ubuntu-24.04", "debian-12", "debian-13", "rhel-8", "rhel-9", "rocky-8", "rocky-9",
                 "almalinux-8", "almalinux-9", "amzn-2023", "alinux-3", "tencentos-3", "ubuntu-20.04"):
        try:
            for_os(parse_os_release((osdir / f"{name}.txt").read_text(), arch="x86_64")).check_dcgm_supported()
            ok.append(name)
        except UnsupportedDistro:
            refused.append(name)
    assert refused == ["debian-13", "alinux-3", "tencentos-3", "ubuntu-20.04"]
