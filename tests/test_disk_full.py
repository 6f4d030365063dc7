"""`disk_full_fix`: a full disk recognised in what the programs print, with the folder to look at (gpunode/errors.py).
The lines are the programs' own wordings: glibc's strerror(ENOSPC) after coreutils' and dpkg's prefixes, apt's check
before downloading (apt-pkg/acquire... "You don't have enough free space in %s."), and a full-disk lab run's cat."""

from __future__ import annotations

import pytest

from gpunode.errors import disk_full_fix


@pytest.mark.parametrize(("output", "folder"), [
    ("cp: error writing '/lib/modules/6.1.0-27-cloud-amd64/updates/dkms/nvidia-current.ko': No space left on device",
     "/lib/modules/6.1.0-27-cloud-amd64/updates/dkms"),
    ("E: You don't have enough free space in /var/cache/apt/archives/.", "/var/cache/apt/archives"),
    ("dd: error writing '/srv/full/filler': No space left on device", "/srv/full"),
    ("cat: write error: No space left on device\nthe package could not be stored in '/tmp/tmp.Ab12.deb' (0 free of "
     "64K on /tmp)", "/tmp"),
])
def test_the_fix_names_the_full_folder(output, folder):
    fix = disk_full_fix(output)
    assert fix.startswith("the host is out of disk space (") and f"`df -h {folder}`" in fix, fix


def test_the_file_being_written_names_the_folder_when_the_output_does_not():
    fix = disk_full_fix("cat: write error: No space left on device", writing="/etc/app/app.conf")
    assert "`df -h /etc/app`" in fix


def test_no_path_anywhere_asks_for_the_usual_suspects():
    assert "`df -h / /var /tmp`" in disk_full_fix("tar: ./x: Cannot write: No space left on device")


@pytest.mark.parametrize("output", ["", "E: Unable to locate package nope", "free space: 12G"])
def test_other_failures_are_not_a_full_disk(output):
    assert disk_full_fix(output) == ""
