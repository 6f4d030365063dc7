"""Plan cases for the repair of an interrupted package manager (the lab case is in tests/faults:
`test_dpkg_killed_mid_install_is_repaired_by_the_next_run`), and the facts that detect it."""

from __future__ import annotations

import subprocess

import pytest

from gpunode.facts import Facts, parse_facts
from gpunode.facts.model import OsInfo, PackageManagerInfo
from gpunode.steps import build_step
from gpunode.steps.base import StepContext
from gpunode.steps.probe import ProbeOutput


def _ctx(manager: str, pkg: PackageManagerInfo) -> StepContext:
    facts = Facts(os=OsInfo(package_manager=manager), pkg=pkg)
    asked = build_step("packages", {"names": ["jq"]}).probe(facts)  # what the steps below ask; nothing printed
    return StepContext(host=None, facts=facts, conn=None, check=False,  # type: ignore[arg-type]
                       probe=ProbeOutput(asked=asked or {}))


@pytest.mark.parametrize("manager", ["apt", "dnf", "yum"])
def test_an_interrupted_package_manager_is_repaired_first_once_per_run(manager):
    pkg = PackageManagerInfo(dpkg_journal=manager == "apt", dpkg_unfinished=("hello:unpacked",),
                             yum_unfinished=manager == "yum")
    ctx = _ctx(manager, pkg)
    step = build_step("packages", {"names": ["jq"]})
    actions = step.plan(ctx)
    assert actions[0].summary.startswith("repair the interrupted package manager first")
    assert "hello:unpacked" in actions[0].reason
    assert actions[1].summary.startswith("install packages: jq")
    # a second packages step of the same run does not repeat the repair
    assert not build_step("packages", {"names": ["jq"]}).plan(ctx)[0].summary.startswith("repair")
    result = subprocess.run(["sh", "-n", "-c", actions[0].command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_healthy_package_manager_plans_no_repair():
    step = build_step("packages", {"names": ["jq"]})
    assert [a.summary for a in step.plan(_ctx("apt", PackageManagerInfo()))] == [
        "install packages: jq (after refreshing the package lists)"]


def test_facts_parse_the_interrupted_state():
    text = ("@@gpunode-facts 1\n@@kv pkgmgr\ndpkg_journal=1\ndpkg_unfinished=hello:unpacked nano:half-configured \n"
            "yum_unfinished=0\n@@end\n")
    pkg = parse_facts(text).pkg
    assert pkg.dpkg_journal and pkg.dpkg_unfinished == ("hello:unpacked", "nano:half-configured")
    assert "dpkg was interrupted" in pkg.interrupted and not pkg.yum_unfinished
