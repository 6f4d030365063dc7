"""The apt sources edit the driver step plans on Debian (gpunode/steps/apt_sources.py): both source formats, the
user's lines kept, idempotent, the lab's own sources already converged."""

from __future__ import annotations

import subprocess

from gpunode.distros import for_os
from gpunode.lab.apt_sources import AptMirrors
from gpunode.steps.apt_sources import parse_sources_probe, planned_sources, sources_probe
from tests.plan_cases import build_facts

DEBIAN12 = for_os(build_facts("debian-12", {}).os)
NEEDED = DEBIAN12.driver_components("distro")


def _plan(files: dict[str, str], distro=DEBIAN12) -> dict[str, tuple[str, list[str]]]:
    return planned_sources(files, distro.driver_components("distro"), distro.is_archive_entry)


def test_one_line_entries_keep_options_and_comments_and_third_party_lines():
    text = ("# the archive\n"
            "deb [arch=amd64] http://deb.debian.org/debian bookworm main  # keep me\n"
            "deb-src http://deb.debian.org/debian bookworm main\n"
            "deb https://download.docker.com/linux/debian bookworm stable\n"
            "deb https://packages.sury.org/php/ bookworm main")
    content, added = _plan({"/etc/apt/sources.list": text})["/etc/apt/sources.list"]
    assert added == list(NEEDED)
    assert content.splitlines() == [
        "# the archive",
        "deb [arch=amd64] http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware  # keep me",
        "deb-src http://deb.debian.org/debian bookworm main",
        "deb https://download.docker.com/linux/debian bookworm stable",
        "deb https://packages.sury.org/php/ bookworm main"]
    assert not content.endswith("\n")  # a file without a final newline stays so
    assert _plan({"/etc/apt/sources.list": content}) == {}  # converged


def test_deb822_disabled_stanzas_and_components_given_elsewhere_are_left_alone():
    files = {"/etc/apt/sources.list.d/debian.sources": "Types: deb\nURIs: http://deb.debian.org/debian\n"
             "Suites: bookworm\nComponents: main\nEnabled: no\n",
             "/etc/apt/sources.list.d/a.list": "deb http://deb.debian.org/debian bookworm main\n"
             "deb http://deb.debian.org/debian bookworm contrib non-free non-free-firmware\n"}
    assert _plan(files) == {}


def test_only_the_missing_components_are_added():
    files = {"/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main non-free-firmware\n"}
    content, added = _plan(files)["/etc/apt/sources.list"]
    assert added == ["contrib", "non-free"]
    assert content == "deb http://deb.debian.org/debian bookworm main non-free-firmware contrib non-free\n"


def test_the_labs_sources_are_converged():
    """The lab writes its rootfs's sources.list with LAB_COMPONENTS: the driver step changes nothing there."""
    mirrors = AptMirrors("http://deb.debian.org/debian", "http://deb.debian.org/debian-security")
    assert _plan({"/etc/apt/sources.list": mirrors.sources_list("bookworm")}) == {}
    debian11 = for_os(build_facts("debian-11", {}).os)
    assert debian11.driver_components("distro") == ("contrib", "non-free")
    assert _plan({"/etc/apt/sources.list": mirrors.sources_list("bullseye")}, debian11) == {}


def test_the_probe_prints_each_file_exactly(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb http://deb.debian.org/debian bookworm main\n")
    (tmp_path / "sources.list.d" / "x.sources").write_text("Types: deb\n\nComponents: main")  # no final newline
    script = sources_probe().replace("/etc/apt", str(tmp_path))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert parse_sources_probe(out) == {
        str(tmp_path / "sources.list"): "deb http://deb.debian.org/debian bookworm main\n",
        str(tmp_path / "sources.list.d" / "x.sources"): "Types: deb\n\nComponents: main"}


def test_other_distros_and_methods_need_no_edit():
    assert DEBIAN12.driver_components("cuda-repo") == ()
    assert for_os(build_facts("ubuntu-22.04", {}).os).driver_components("distro") == ()
