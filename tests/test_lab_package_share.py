"""The package share on real lab hosts: three fresh hosts install the same packages from Debian's mirror with
`package_cache` on; one host downloads each file, the others get it from the controller's folder, and apt on each host
installs from its archive cache without fetching those files. A file changed in the folder never reaches a host's
archive cache: the controller drops it and the host would refuse it (its sha256 is checked against the host's own
package index)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile

import pytest

from gpunode.parsers.apt_downloads import Download
from gpunode.pkgshare.remote import seed_command
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab
PLAYBOOK = "steps:\n  - name: tools\n    packages: {names: [jq, rsync]}\n"
ARCHIVES = "var/cache/apt/archives"


def _notes(report) -> dict[str, str]:
    return {h["host"]: " ".join(h.get("notes") or []) for h in json.loads(report.read_text())["hosts"]}


def _fetched_from_mirror(log: str) -> list[str]:
    """The packages apt itself fetched during the install (its `Get:N URI SUITE/COMPONENT ARCH NAME ARCH VERSION [SIZE]`
    lines)."""
    return re.findall(r"Get:\d+ \S+ \S+ \S+ (\S+) \S+ \S+ \[", log)


def test_three_hosts_fetch_each_file_once(lab, fresh_trio, tmp_path):
    playbook = tmp_path / "tools.yml"
    playbook.write_text(PLAYBOOK)
    cache = tmp_path / "packages"
    inventory = host_inventory(lab, fresh_trio, tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var",
                     f"package_cache={cache}", "-v", "--json-report", str(report), timeout=900)
    assert result.code == 0, result.output
    stored = {p.parent.name: p for p in cache.glob("*/*/*.deb")}
    assert len(stored) >= 2 and any(p.name.startswith("jq_") for p in stored.values()), stored
    for digest, path in stored.items():  # the folder holds each file under its own sha256
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest

    notes = _notes(report)
    downloaded = [h for h, n in notes.items() if f"{len(stored)} downloaded here and shared" in n]
    received = [h for h, n in notes.items() if f"{len(stored)} of {len(stored)} files" in n]
    assert len(downloaded) == 1 and len(received) == 2, notes
    assert not _fetched_from_mirror(result.stdout), _fetched_from_mirror(result.stdout)  # apt fetched none of them
    for host in fresh_trio:
        status = host.run_inside("dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' jq rsync")
        assert status.stdout.split("\n")[:2] == ["ii  jq", "ii  rsync"], status.stdout
        for digest, path in stored.items():  # what apt installed from: the same bytes on every host
            placed = host.root / ARCHIVES / path.name
            assert hashlib.sha256(placed.read_bytes()).hexdigest() == digest


def test_a_changed_file_never_reaches_apt(lab, fresh_trio, tmp_path):
    playbook = tmp_path / "tools.yml"
    playbook.write_text(PLAYBOOK)
    cache = tmp_path / "packages"
    first, second, third = fresh_trio
    run = run_cli("provision", "-i", str(host_inventory(lab, [first], tmp_path / "a.yml")), "--playbook",
                  str(playbook), "--var", f"package_cache={cache}", timeout=900)
    assert run.code == 0, run.output
    (jq,) = cache.glob("*/*/jq_*.deb")
    genuine = jq.read_bytes()
    jq.write_bytes(bytes(len(genuine)))  # same size, other bytes: apt alone would take it (it checks the size)

    # The host's own check: a file whose sha256 is not its index's is refused and nothing is placed.
    download = Download("", jq.name, len(genuine), jq.parent.name, "")
    (second.root / "var/tmp/changed.tar").write_bytes(_tar(jq))
    inside = second.run_inside(f"rm -f /{ARCHIVES}/{jq.name}; {{ {seed_command([download])}; }} < /var/tmp/changed.tar")
    assert inside.returncode == 5, inside.stdout + inside.stderr
    assert not (second.root / ARCHIVES / jq.name).exists()

    # Through gpunode: the controller drops the damaged file; apt fetches the genuine one from the mirror.
    report = tmp_path / "r.json"
    run = run_cli("provision", "-i", str(host_inventory(lab, [third], tmp_path / "c.yml")), "--playbook",
                  str(playbook), "--var", f"package_cache={cache}", "-v", "--json-report", str(report), timeout=900)
    assert run.code == 0, run.output
    assert "jq" in _fetched_from_mirror(run.stdout), run.stdout[-3000:]
    placed = third.root / ARCHIVES / jq.name
    assert placed.read_bytes() == genuine
    assert "left to apt" in _notes(report)[third.name]


def _tar(path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(str(path), arcname=path.name)
    return out.getvalue()
