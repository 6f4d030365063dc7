"""The pinned dpkg image's answers against real dpkg: the packages of a pinned apt state written as a dpkg status
database (name, version, `install ok installed`), then the packages step's probes run by Debian's own dpkg-query and
apt-mark against it and by the state's answerer (gpunode/image/image_state.py) must print the same; the probe's output
must parse to what the plan needs. Needs dpkg-query and apt-mark (this machine is Debian); skipped without them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.image.image_state import answer, bases, load_state
from gpunode.steps.apt_sources import sources_probe
from gpunode.steps.pkgmgr import AptManager, Wanted
from gpunode.steps.probe import ProbeOutput

pytestmark = pytest.mark.skipif(not (shutil.which("dpkg-query") and shutil.which("apt-mark")),
                                reason="needs dpkg-query, apt-mark")
BASE_PACKAGES = ["ca-certificates", "curl", "gnupg", "jq", "pciutils"]
APT_BASES = [b for b in bases() if load_state(b).manager == "apt"]


def _dpkg_env(tmp_path: Path, base: str, held: tuple[str, ...] = ()) -> dict[str, str]:
    """DPKG_ADMINDIR and APT_CONFIG pointing dpkg-query and apt-mark at a status file of the base's pinned packages."""
    admin = tmp_path / "dpkg"
    (admin / "updates").mkdir(parents=True)
    (admin / "info").mkdir()
    state = load_state(base)
    stanzas = []
    for package in state.packages.values():
        version = package.version.removesuffix("-unknown")
        status = "hold ok installed" if package.name in held else "install ok installed"
        stanzas.append(f"Package: {package.name}\nStatus: {status}\nPriority: optional\nSection: misc\n"
                       f"Maintainer: pinned <pinned@invalid>\nArchitecture: amd64\nVersion: {version}\n"
                       "Description: pinned\n")
    (admin / "status").write_text("\n".join(stanzas))
    config = tmp_path / "apt.conf"
    config.write_text(f'Dir::State::status "{admin / "status"}";\n'
                      f'Dir::State::extended_states "{tmp_path / "extended_states"}";\n')
    return {"DPKG_ADMINDIR": str(admin), "APT_CONFIG": str(config), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}


def _real(snippet: str, env: dict[str, str]) -> str:
    return subprocess.run(["sh", "-c", snippet], env=env, capture_output=True, text=True, timeout=60).stdout


def test_there_are_pinned_apt_images():
    assert {"debian-12", "debian-13"} <= set(APT_BASES)


@pytest.mark.parametrize("base", APT_BASES)
def test_real_dpkg_and_the_pinned_state_answer_the_probe_alike(tmp_path, base):
    env = _dpkg_env(tmp_path, base)
    state = load_state(base)
    manager = AptManager()
    probes = [manager.probe(BASE_PACKAGES)["installed"],
              manager.probe(["linux-image-cloud-amd64", "nvidia-*", "cloud-init"])["installed"],
              manager.held_probe()]
    for snippet in probes:
        assert _real(snippet, env) == answer(state, snippet), snippet
    assert not state.unanswered


def test_real_dpkg_output_plans_what_the_debian_image_lacks(tmp_path):
    """Debian's EC2 image installs ca-certificates, curl and pciutils (the EXTRAS class); gnupg and jq are not in its
    package lists."""
    env = _dpkg_env(tmp_path, "debian-12")
    manager = AptManager()
    real = _real(manager.probe(BASE_PACKAGES)["installed"], env)
    installed = manager.parse(ProbeOutput({"installed": real, "lists": "0\n"})).installed
    missing = [w.name for w in map(Wanted.parse, BASE_PACKAGES) if not w.satisfied_by(installed.get(w.name))]
    assert missing == ["gnupg", "jq"]


def test_a_held_package_is_what_real_apt_mark_shows(tmp_path):
    """The answerer says `no holds` for a state that pins none; real apt-mark, given a hold, prints it (the check is
    not empty by construction)."""
    env = _dpkg_env(tmp_path, "debian-12", held=("curl",))
    assert _real(AptManager().held_probe(), env) == "curl\n"
    assert answer(load_state("debian-12"), AptManager().held_probe()) == ""


def test_the_empty_lists_answer_reads_as_no_lists():
    """The Debian build empties /var/lib/apt/lists: the probe reads no lists, so the plan refreshes them first."""
    state = load_state("debian-12")
    lists = AptManager().probe(["jq"])["lists"]
    assert AptManager().parse(ProbeOutput({"installed": "", "lists": answer(state, lists)})).cache_age_seconds is None


@pytest.mark.parametrize("base", APT_BASES)
def test_the_real_shell_prints_the_pinned_sources_as_the_answerer_does(tmp_path, base):
    """The apt-sources probe run by sh over the state's files written under a private root prints what the
    answerer prints (glob order, file marks, last newlines)."""
    state = load_state(base)
    assert state.apt_sources, base
    for path, text in state.apt_sources.items():
        (tmp_path / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.lstrip("/")).write_text(text)
    (tmp_path / "etc/apt/sources.list.d/unrelated.conf").write_text("not a sources file\n")
    root = f"{tmp_path}/etc/apt/"
    real = _real(sources_probe().replace("/etc/apt/", root), {"PATH": "/usr/bin:/bin"})
    assert real == answer(state, sources_probe()).replace("@@file /etc/apt/", f"@@file {root}")
    assert "Components: main\n" in real
