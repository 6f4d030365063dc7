"""scripts/atomic_write.sh, run for real in a temp folder: nothing half-written, backups, guards."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from gpunode.scripts import script_text


def write(path: Path, content: str, expect: str = "", validate: str = "",
          mode: str = "") -> subprocess.CompletedProcess[str]:
    args = [str(path), mode, "", "", expect, "1", validate]
    return subprocess.run(["sh", "-c", script_text("atomic_write.sh"), "atomic-write", *args],
                          input=content, capture_output=True, text=True)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_creates_then_replaces_with_a_backup(tmp_path):
    target = tmp_path / "etc" / "fstab"
    assert write(target, "one\n", expect="absent").returncode == 0
    assert target.read_text() == "one\n"
    assert write(target, "two\n", expect=sha("one\n"), mode="600").returncode == 0
    assert target.read_text() == "two\n"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    backups = list(target.parent.glob("fstab.*.gpunode.bak"))
    assert [b.read_text() for b in backups] == ["one\n"]
    assert not list(target.parent.glob(".fstab.gpunode.*"))  # no temp file left


def test_refuses_when_the_file_changed_since_it_was_read(tmp_path):
    target = tmp_path / "daemon.json"
    target.write_text('{"log-driver": "json-file"}\n')
    result = write(target, "{}\n", expect=sha("something else"))
    assert result.returncode == 3
    assert "changed since it was read" in result.stderr
    assert target.read_text() == '{"log-driver": "json-file"}\n'


def test_failed_validation_keeps_the_old_file(tmp_path):
    target = tmp_path / "daemon.json"
    target.write_text("{}\n")
    result = write(target, "{not json", validate='python3 -m json.tool "$1" >/dev/null')
    assert result.returncode == 4
    assert "failed validation" in result.stderr
    assert target.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


def test_awkward_file_names_are_safe(tmp_path):
    target = tmp_path / "it's $(touch pwned) `id`; x"
    assert write(target, "ok\n", validate='test -s "$1"').returncode == 0
    assert target.read_text() == "ok\n"
    assert not (tmp_path / "pwned").exists()


def test_a_symlink_stays_a_symlink_and_its_target_is_rewritten(tmp_path):
    """config.toml -> /etc/k8s/containerd.toml: replacing the link by a plain file would leave the real config
    (the one a cluster tool manages) without the change (found by a new user)."""
    target = tmp_path / "k8s" / "containerd.toml"
    target.parent.mkdir()
    target.write_text("version = 2\n")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    assert write(link, "version = 3\n", expect=sha("version = 2\n")).returncode == 0
    assert link.is_symlink() and target.read_text() == "version = 3\n"
    assert [b.read_text() for b in target.parent.glob("containerd.toml.*.gpunode.bak")] == ["version = 2\n"]
    dangling = tmp_path / "dangling.toml"
    dangling.symlink_to(tmp_path / "missing" / "x.toml")
    result = write(dangling, "x\n")
    assert result.returncode == 7 and "dangling symlink" in result.stderr


def test_only_the_newest_five_backups_of_a_file_are_kept(tmp_path):
    target = tmp_path / "config.toml"
    target.write_text("v0\n")
    old = [tmp_path / f"config.toml.2025010{i}-000000.gpunode.bak" for i in range(1, 7)]
    for i, path in enumerate(old):
        path.write_text(f"old {i}\n")
    other = tmp_path / "daemon.json.20250101-000000.gpunode.bak"
    other.write_text("another file's backup\n")
    assert write(target, "v1\n", expect=sha("v0\n")).returncode == 0
    kept = sorted(p.name for p in tmp_path.glob("config.toml.*.gpunode.bak"))
    assert len(kept) == 5 and kept[-1].startswith("config.toml.20")  # today's backup of v0 is the newest
    assert not old[0].exists() and not old[1].exists() and old[2].exists()
    assert other.exists()
