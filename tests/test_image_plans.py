"""`gpunode plan --image BASE --playbook P`: a bake planned offline from the base image's pinned state
(gpunode/image/states/). The plans of `base` and `gpu-node` on each pinned base install nothing that conflicts with
a package the image holds (a `-minimal` twin is swapped, never installed over), and every pinned fact has its source.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from gpunode.distros import IMAGE_BASES
from gpunode.distros.rpm_twins import twin_of
from gpunode.image.image_state import STATES_DIR, UNPINNED, bases, load_state
from gpunode.image.offline_plan import plan_image

MUST_HAVE = ("al2023", "al2023-ecs-gpu", "rocky-9")
PINNED = (*MUST_HAVE, "al2023-ecs", "alma-9", "debian-12", "debian-13")
# gpu-node's default driver branch where the distro's archive has another (gpunode/distros/debian.py)
DRIVER_BRANCH = {"debian-13": "550"}


def _plan_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpunode", "plan", *args], capture_output=True, text=True,
                          timeout=120)


def _installed_names(command: str) -> list[str]:
    """The package names each `dnf ... install -- NAMES` of a command installs (swaps are not installs)."""
    names = []
    for part in re.split(r"&&|;|\|\|", command):
        words = shlex.split(part.replace("{", " ").replace("}", " "))
        if "install" in words and "--" in words and words[0] in ("dnf", "yum"):
            names += [w for w in words[words.index("--") + 1:] if not w.startswith("-")]
    return names


def _conflicts(base: str, commands: list[str]) -> list[str]:
    """Installs that dnf would refuse next to the image's packages: a full build (or a plain name the twin serves)
    installed while its `-minimal` twin is there, outside a swap."""
    state = load_state(base)
    found = []
    for command in commands:
        for name in _installed_names(command):
            twin = twin_of(name)
            if twin and twin.minimal in state.packages and name != twin.minimal:
                found.append(f"{name} installed next to {twin.minimal}: {command}")
            if "--allowerasing" in command and "module switch-to" not in command:
                found.append(f"--allowerasing may erase more than a twin: {command}")
    return found


@pytest.mark.parametrize("base", bases())
def test_cli_base_plan_installs_nothing_that_conflicts(base):
    result = _plan_cli("--image", base, "--playbook", "base", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["base"] == base and plan["offline"] is True
    commands = [a["command"] for s in plan["steps"] for a in s["actions"] if a["command"]]
    installs = [c for c in commands if " install " in c or " swap " in c]
    assert installs, "base.yml installs its base packages somewhere"
    assert not _conflicts(base, installs)
    assert not [s for s in plan["steps"] if s["error"]]


def test_cli_al2023_base_does_not_install_curl_or_gnupg():
    """The seed 004 failure: base.yml's curl and gnupg are curl-minimal's and gnupg2-minimal's on AL2023."""
    plan = json.loads(_plan_cli("--image", "al2023", "--playbook", "base", "--json").stdout)
    packages = next(s for s in plan["steps"] if s["kind"] == "packages")
    names = _installed_names(packages["actions"][0]["command"])
    assert names == ["ca-certificates", "jq", "pciutils"]


@pytest.mark.parametrize("base", PINNED)
def test_gpu_node_plan_from_each_pinned_state(base):
    plan = plan_image(base, "gpu-node", {"driver_branch": DRIVER_BRANCH[base]} if base in DRIVER_BRANCH else None)
    assert [s.kind for s in plan.steps][:3] == ["wait_for_package_manager", "kernel_headers", "nvidia_driver"]
    assert not [s.error for s in plan.steps if s.error]
    assert not _conflicts(base, plan.installs())


def test_ecs_gpu_image_keeps_its_headers_and_docker():
    """The ECS GPU AMI has the running kernel's kernel-devel and Docker: neither is installed again."""
    plan = plan_image("al2023-ecs-gpu", "gpu-node")
    by_kind = {s.kind: s for s in plan.steps}
    assert by_kind["kernel_headers"].actions == []
    assert not [a for a in by_kind["docker"].actions if " install " in (a["command"] or "")]


def test_unknown_base_exits_2_with_the_bases():
    result = _plan_cli("--image", "windows-11", "--playbook", "base")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for base in MUST_HAVE:
        assert base in result.stderr + result.stdout


def test_every_pinned_fact_has_its_source():
    for path in sorted(STATES_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        entries = data.get("packages", []) + data.get("versionlock", []) + data.get("removed", []) + \
            data.get("repos", [])
        assert entries, path.name
        assert not [e for e in entries if not str(e.get("source", "")).strip()], path.name
        for key in ("os_release", "kernel"):
            if key in data and "same_as" not in data[key]:
                assert data[key].get("source"), f"{path.name}: {key}"


def test_debian_13_default_branch_is_refused_with_the_fix():
    """trixie's archive has branch 550, not gpu-node's default 535: the plan says so and how to pick it."""
    driver = next(s for s in plan_image("debian-13", "gpu-node").steps if s.kind == "nvidia_driver")
    assert driver.error and "550" in driver.error["message"] and "driver_branch" in driver.error["fix"]


def test_debian_plans_read_the_image_s_apt_sources():
    """The Debian states answer every probe of the packages step and the driver's apt-sources probe: nothing the
    plan decides on is guessed (the lists are empty, so installs refresh them first)."""
    for base in ("debian-12", "debian-13"):
        plan = plan_image(base, "gpu-node", {"driver_branch": DRIVER_BRANCH.get(base, "535")})
        steps = {s.kind: s for s in plan.steps}
        assert not [u for u in steps["nvidia_driver"].unanswered if "/etc/apt/sources.list" in u]
        assert steps["nvidia_driver"].actions[0]["summary"].startswith("enable contrib non-free non-free-firmware")
        base_plan = plan_image(base, "base")
        packages = next(s for s in base_plan.steps if s.kind == "packages")
        assert packages.unanswered == [] and " update && " in packages.actions[0]["command"]


@pytest.mark.parametrize("base", sorted(UNPINNED))
def test_offered_base_without_a_pinned_state_exits_2_saying_why(base):
    result = _plan_cli("--image", base, "--playbook", "base")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())  # the CLI wraps long lines
    assert " ".join(f"no pinned image state for base {base!r}: {UNPINNED[base]}".split()) in said
    assert "debian-12" in result.stderr


def test_every_offered_base_is_pinned_or_says_why_not():
    """No base gpunode offers is left silent: it has a state, or `plan --image` names the reason it has none."""
    assert set(IMAGE_BASES) <= set(bases()) | set(UNPINNED)
    assert not set(bases()) & set(UNPINNED)


def test_pinned_bases_are_offered_bases_or_documented_distros():
    offered = set(IMAGE_BASES) | {"al2023", "al2023-ecs", "al2023-ecs-gpu", "rocky-9", "alma-9"}
    assert set(PINNED) == set(bases()) and set(bases()) <= offered


def test_the_conflict_check_catches_an_install_over_a_twin():
    """The check above is not empty by construction: today's plan (`dnf install curl` next to curl-minimal) fails it."""
    assert _conflicts("al2023", ["dnf -y --setopt=install_weak_deps=False install -- ca-certificates curl jq"])
    assert _conflicts("al2023", ["dnf -y install --allowerasing -- curl"])
    assert not _conflicts("al2023", ["dnf -y swap curl-minimal curl-full"])


def test_plan_says_when_build_ami_refuses_the_playbook():
    """A new user previewing seed 004's bake with gpu-node is told that build-ami refuses it on the ECS GPU AMI (it
    installs a second driver), instead of reading a driver swap the bake never does; other bases say nothing."""
    text = _plan_cli("--image", "al2023-ecs-gpu", "--playbook", "gpu-node")
    assert text.returncode == 0, text.stderr
    assert "`gpunode build-ami --base al2023-ecs-gpu` refuses playbook gpu-node" in text.stdout.splitlines()[1]
    as_json = json.loads(_plan_cli("--image", "al2023-ecs-gpu", "--playbook", "gpu-node", "--json").stdout)
    assert "refuses playbook gpu-node" in as_json["build_ami_refuses"]
    for base, playbook in (("al2023-ecs-gpu", "base"), ("rocky-9", "gpu-node")):
        result = _plan_cli("--image", base, "--playbook", playbook, "--json")
        assert json.loads(result.stdout)["build_ami_refuses"] is None, (base, playbook)
