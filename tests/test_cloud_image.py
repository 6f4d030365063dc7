"""The lab's cloud base image layout: an MBR that real partitioning tools read, the filesystem at its offset."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.lab.cloud_image import PARTITION_START, mbr, write_partitioned_disk


@pytest.mark.skipif(not (shutil.which("partx") and shutil.which("mkfs.ext4") and shutil.which("blkid")),
                    reason="needs util-linux partx/blkid and e2fsprogs")
def test_partitioned_disk_is_read_by_partx_and_blkid(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "hostname").write_text("cloud\n")
    root, disk = tmp_path / "root.raw", tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "gpunode-root", "-d", str(tree), str(root), "64M"], check=True)

    write_partitioned_disk(root, disk)

    assert disk.stat().st_size == PARTITION_START + root.stat().st_size
    assert disk.stat().st_blocks * 512 < 16 * 2**20  # zero blocks were skipped, not written
    table = subprocess.run(["partx", "--raw", "--noheadings", "--output", "NR,START,SECTORS,TYPE",
                            str(disk)], capture_output=True, text=True, check=True).stdout.split()
    assert table == ["1", str(PARTITION_START // 512), str(root.stat().st_size // 512), "0x83"]
    probe = subprocess.run(["blkid", "-p", "-O", str(PARTITION_START), "-o", "export", str(disk)],
                           capture_output=True, text=True, check=True).stdout
    assert "TYPE=ext4" in probe and "LABEL=gpunode-root" in probe
    with open(disk, "rb") as raw:
        raw.seek(PARTITION_START)
        assert raw.read(1 << 20) == root.read_bytes()[: 1 << 20]


def test_mbr_marks_the_one_partition_bootable_and_ends_with_the_signature() -> None:
    sector = mbr(PARTITION_START, 3 * 2**30)
    assert len(sector) == 512 and sector[510:] == b"\x55\xaa"
    entry = sector[446:462]
    assert entry[0] == 0x80 and entry[4] == 0x83  # active, Linux
    assert int.from_bytes(entry[8:12], "little") == 2048
    assert int.from_bytes(entry[12:16], "little") == 3 * 2**30 // 512
    assert sector[462:510] == bytes(48)  # the other three entries are empty
