"""Steps without a host: argument validation, planning logic, package-manager parsing."""

from __future__ import annotations

import pytest

from gpunode.steps import build_step
from gpunode.steps.files import LineStep
from gpunode.steps.pkgmgr import AptManager, DnfManager, Wanted, manager_for
from gpunode.steps.probe import ProbeOutput


def test_arguments_are_validated_and_coerced():
    step = build_step("packages", {"names": "jq", "cache_valid_time": "60"})
    assert step.names == ["jq"] and step.cache_valid_time == 60
    with pytest.raises(ValueError, match="unknown argument"):
        build_step("packages", {"name": ["jq"]})
    with pytest.raises(ValueError, match="must be one of"):
        build_step("service", {"name": "docker", "state": "running"})
    with pytest.raises(ValueError, match="must be true or false"):
        build_step("service", {"name": "docker", "enabled": "maybe"})
    with pytest.raises(ValueError, match="needs argument"):
        build_step("command", {})
    with pytest.raises(ValueError, match="not a package name"):
        build_step("packages", {"names": ["jq; reboot"]})
    with pytest.raises(ValueError, match="absolute"):
        build_step("file", {"path": "etc/x", "content": ""})


def test_line_edit_replaces_in_place_and_removes_duplicates():
    step = LineStep(path="/etc/x", line="SystemMaxUse=1G", regexp=r"^#?\s*SystemMaxUse=")
    text = "[Journal]\n#SystemMaxUse=\nStorage=auto\nSystemMaxUse=5G\n"
    assert step.edit(text) == "[Journal]\nSystemMaxUse=1G\nStorage=auto\n"
    assert step.edit(step.edit(text)) == step.edit(text)  # idempotent
    assert LineStep(path="/etc/x", line="a=1").edit("b=2") == "b=2\na=1\n"
    assert LineStep(path="/etc/x", line="a=1").edit("") == "a=1\n"
    gone = LineStep(path="/etc/x", regexp="^a=", state="absent")
    assert gone.edit("a=1\nb=2\na=3\n") == "b=2\n"


def test_apt_probe_output_is_parsed():
    output = ProbeOutput({"installed": "curl\tii \t7.88.1-10+deb12u15\njq\trc \t1.6-2.1\n"
                                       "nvidia-driver\tii \t535.247.01-1~deb12u1\n",
                          "lists": "9\n1795316241\n1795316250\n"})
    state = AptManager().parse(output)
    assert state.installed == {"curl": "7.88.1-10+deb12u15", "nvidia-driver": "535.247.01-1~deb12u1"}
    assert state.cache_age_seconds == 9
    no_lists = ProbeOutput({"lists": "0\n1\n2\n"}, asked=("installed", "lists"))  # asked both, `installed` silent
    assert AptManager().parse(no_lists).cache_age_seconds is None  # no lists yet: refresh


def test_version_pins_and_install_commands():
    assert Wanted.parse("nvidia-driver=535.*").satisfied_by("535.247.01-1~deb12u1")
    assert not Wanted.parse("nvidia-driver=550.*").satisfied_by("535.247.01-1~deb12u1")
    apt = AptManager().install([Wanted.parse("jq"), Wanted.parse("nvidia-driver=535.*")], True, False)
    assert "apt-get -y -q -o DPkg::Lock::Timeout=600 -o Acquire::Languages=none update && " in apt
    assert apt.endswith("--no-install-recommends install -- jq 'nvidia-driver=535.*'")
    assert "DEBIAN_FRONTEND=noninteractive" in apt
    dnf = DnfManager("dnf").install([Wanted.parse("kernel-devel=5.14.0")], False, False)
    assert dnf == "dnf -y --setopt=install_weak_deps=False install -- kernel-devel-5.14.0"
    assert DnfManager().parse(ProbeOutput({"installed": "jq\t1.6-8.el9\n"})).installed == {"jq": "1.6-8.el9"}
    assert manager_for("yum").name == "yum"
    with pytest.raises(ValueError):
        manager_for(None)


def test_trailing_newlines_and_empty_names_are_refused():
    """Regressions found by the hypothesis fuzzing in tests/faults: `$` in a regex accepts a trailing newline."""
    with pytest.raises(ValueError, match="absolute path"):
        build_step("nfs_mount", {"server": "nas.example.com", "export": "/data", "path": "/mnt/data\n"})
    with pytest.raises(ValueError, match="not a package name"):
        build_step("packages", {"names": ["="]})
    with pytest.raises(ValueError, match="not a package name"):
        build_step("packages", {"names": ["jq\n"]})
    assert build_step("packages", {"names": ["nvidia-driver=535.*"]}).names == ["nvidia-driver=535.*"]
