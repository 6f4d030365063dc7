"""The pinned image's rpm answers against real rpm: the packages of a pinned state built as empty RPMs (name,
version, provides) into a private rpm database, then the packages step's probe run by rpm itself and by the state's
answerer (gpunode/image/image_state.py) must print the same; the probe's output must parse to what the plan needs.
Needs rpm and rpmbuild (Debian's `rpm` package); skipped without them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.image.image_state import answer, load_state
from gpunode.steps.pkgmgr import DnfManager, Wanted
from gpunode.steps.probe import ProbeOutput

pytestmark = pytest.mark.skipif(not (shutil.which("rpm") and shutil.which("rpmbuild")), reason="needs rpm, rpmbuild")
BASE_PACKAGES = ["ca-certificates", "curl", "gnupg", "jq", "pciutils"]


def _rpm_home(tmp_path: Path, base: str) -> dict[str, str]:
    """HOME whose ~/.rpmmacros points rpm at a private database holding the base's pinned packages."""
    home, db, top = tmp_path / "home", tmp_path / "db", tmp_path / "build"
    home.mkdir()
    (home / ".rpmmacros").write_text(f"%_dbpath {db}\n%_topdir {top}\n")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    for package in load_state(base).packages.values():
        version, _, release = package.version.rpartition("-")
        spec = tmp_path / f"{package.name}.spec"
        spec.write_text("".join([
            f"Name: {package.name}\nVersion: {version}\nRelease: {release}\nSummary: pinned\nLicense: MIT\n",
            "BuildArch: noarch\n", *(f"Provides: {p}\n" for p in package.provides),
            "%description\npinned\n%files\n"]))
        subprocess.run(["rpmbuild", "-bb", "--quiet", str(spec)], env=env, check=True, capture_output=True)
    subprocess.run(["rpm", "--initdb"], env=env, check=True)
    subprocess.run(["rpm", "-i", "--nodeps", "--justdb", "--ignorearch", "--ignoreos",
                    *map(str, sorted((top / "RPMS" / "noarch").glob("*.rpm")))], env=env, check=True,
                   capture_output=True)
    return env


@pytest.mark.parametrize("base", ["al2023", "al2023-ecs"])
def test_real_rpm_and_the_pinned_state_answer_the_probe_alike(tmp_path, base):
    env = _rpm_home(tmp_path, base)
    state = load_state(base)
    probes = [DnfManager().probe(BASE_PACKAGES)["installed"],
              "rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' -- " + " ".join(BASE_PACKAGES) + " 2>/dev/null"]
    for snippet in probes:  # the probe now, and the by-name query it replaced
        real = subprocess.run(["sh", "-c", snippet], env=env, capture_output=True, text=True).stdout
        assert real == answer(state, snippet), snippet


def test_real_rpm_output_plans_no_curl_and_swaps_a_full_build(tmp_path):
    env = _rpm_home(tmp_path, "al2023")
    manager = DnfManager()
    snippet = manager.probe([*BASE_PACKAGES, "gnupg2-full"])["installed"]
    real = subprocess.run(["sh", "-c", snippet], env=env, capture_output=True, text=True).stdout
    state = manager.parse(ProbeOutput({"installed": real}))
    assert state.providers["curl"] == "curl-minimal"
    assert state.providers["gnupg"] == "gnupg2-minimal"
    missing = [w for w in map(Wanted.parse, BASE_PACKAGES) if not w.satisfied_by(state.installed.get(w.name))]
    assert [w.name for w in missing] == ["ca-certificates", "jq", "pciutils"]
    assert manager.swaps([Wanted("gnupg2-full")], state) == [("gnupg2-minimal", "gnupg2-full")]
