"""Disk full on the target filesystem during a config write: a clear error, the old file intact, nothing left.

A tiny tmpfs (64 KiB) is mounted inside a fresh lab host; the config lives there and a filler takes the rest.
Guards: scripts/atomic_write.sh writes a temp file in the same folder and renames it only when every step
(write, backup, validation) succeeded; its trap removes the temp file on failure. An in-place write would
truncate the old file when the disk is full, and a missing trap would leave `.NAME.gpunode.*` behind.
"""

from __future__ import annotations

import pytest

from tests.conftest import host_inventory, run_cli
from tests.faults.helpers import host_report

pytestmark = pytest.mark.lab

FULL = "/srv/full"
CONF = f"{FULL}/app.conf"
OLD = "".join(f"key{i:04d}=value\n" for i in range(500))  # 7500 bytes: 2 pages of tmpfs
PAGE = 4096


def _mount_full(host, keep_bytes: int) -> None:
    """A 64 KiB tmpfs at FULL with CONF = OLD, filled up but for `keep_bytes`."""
    setup = (f"mkdir -p {FULL} && mount -t tmpfs -o size=64k tmpfs {FULL} && printf '%s' \"$OLD\" > {CONF} && "
             f"(dd if=/dev/zero of={FULL}/filler bs=4k 2>/dev/null; true) && "
             f"truncate -s -{keep_bytes} {FULL}/filler && stat -f -c '%a' {FULL}")
    result = host.run_inside(f"OLD='{OLD}'; export OLD; {setup}")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) == keep_bytes // PAGE  # free blocks, exactly as planned


def _state(host) -> tuple[str, list[str]]:
    listing = host.run_inside(f"sha256sum < {CONF}; ls -A {FULL}").stdout.split()
    return listing[0], sorted(listing[2:])


CASES = {
    # name: (free bytes left, step)
    "file bigger than the free space": (0, {"file": {"path": CONF, "content": OLD + "x" * 9000 + "\n"}}),
    "line makes it bigger": (0, {"line": {"path": CONF, "regexp": "^added=", "line": "added=" + "y" * 9000}}),
    "new file fits, its backup does not": (3 * PAGE, {"file": {"path": CONF, "content": OLD + "z=1\n"}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_disk_full_during_a_config_write_keeps_the_old_file(lab, fresh_host, tmp_path, case):
    import yaml

    keep, step = CASES[case]
    _mount_full(fresh_host, keep)
    old_sha, old_listing = _state(fresh_host)
    assert old_listing == ["app.conf", "filler"]
    playbook = tmp_path / "p.yml"
    playbook.write_text(yaml.safe_dump({"steps": [{"name": "write config", **step}]}))
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                     str(tmp_path / "r.json"), "--log-dir", str(tmp_path / "logs"))
    assert result.code == 1, result.output
    host = host_report(tmp_path / "r.json")
    assert host["failed_step"] == "write config"
    assert "No space left on device" in host["error"], host["error"]
    assert "the old file was left untouched" in host["fix"]
    assert _state(fresh_host) == (old_sha, old_listing)  # byte-identical, no temp file, no partial backup

    fresh_host.run_inside(f"rm -f {FULL}/filler")
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--log-dir",
                    str(tmp_path / "logs2"))
    assert again.code == 0, again.output
    new_sha, listing = _state(fresh_host)
    assert new_sha != old_sha
    assert len(listing) == 2 and listing[0] == "app.conf" and listing[1].endswith(".gpunode.bak")
    backup = fresh_host.run_inside(f"sha256sum < {FULL}/{listing[1]}").stdout.split()[0]
    assert backup == old_sha  # the backup is the whole old file
