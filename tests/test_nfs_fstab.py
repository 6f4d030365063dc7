"""gpunode's fstab line: written once, replaced in place, removed cleanly; foreign or broken lines are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpunode.steps.nfs.fstab import FstabConflict, edit, entry_line, find, marker

LINE = entry_line("nas:/", "/mnt/data", "nfs", "vers=3,hard,_netdev")
USER_FSTAB = (
    "# /etc/fstab: static file system information.\n"
    "UUID=3e6c-11 /               ext4    errors=remount-ro 0       1\n"
    "/dev/nvme1n1\t/scratch\txfs\tdefaults,nofail  0 2   \n"
)


def test_added_once_at_the_end_and_idempotent():
    first = edit(USER_FSTAB, "/mnt/data", LINE)
    assert first == USER_FSTAB + f"{marker('/mnt/data')}\n{LINE}\n"
    assert edit(first, "/mnt/data", LINE) == first
    assert edit("no newline at the end", "/mnt/data", LINE) == f"no newline at the end\n{marker('/mnt/data')}\n{LINE}\n"
    assert edit("", "/mnt/data", LINE) == f"{marker('/mnt/data')}\n{LINE}\n"


def test_changed_options_replace_the_line_in_place():
    text = edit(USER_FSTAB, "/mnt/data", LINE) + "tmpfs /tmp tmpfs size=1G 0 0\n"
    new_line = LINE.replace("vers=3", "vers=4.1")
    changed = edit(text, "/mnt/data", new_line)
    assert changed == text.replace(LINE, new_line)
    assert changed.count("/mnt/data nfs") == 1
    assert changed.splitlines()[-1] == "tmpfs /tmp tmpfs size=1G 0 0"  # the line kept its place


def test_removal_takes_the_marker_and_the_line_and_nothing_else():
    text = edit(USER_FSTAB, "/mnt/data", LINE) + "tmpfs /tmp tmpfs size=1G 0 0\n"
    assert edit(text, "/mnt/data", None) == USER_FSTAB + "tmpfs /tmp tmpfs size=1G 0 0\n"
    assert edit(USER_FSTAB, "/mnt/data", None) == USER_FSTAB


def test_a_foreign_line_for_the_mount_point_is_reported_not_overwritten():
    text = USER_FSTAB + "old-nas:/share /mnt/data/ nfs defaults 0 0\n"
    with pytest.raises(FstabConflict, match="gpunode did not write") as caught:
        edit(text, "/mnt/data", LINE)
    assert "line 4" in str(caught.value) and "hand it to gpunode" in caught.value.fix
    with pytest.raises(FstabConflict, match="gpunode did not write"):
        edit(text, "/mnt/data", None)  # absent never removes a line it does not own
    handed_over = USER_FSTAB + marker("/mnt/data") + "\nold-nas:/share /mnt/data nfs defaults 0 0\n"
    assert edit(handed_over, "/mnt/data", LINE).endswith(f"{marker('/mnt/data')}\n{LINE}\n")


def test_broken_or_duplicated_lines_are_reported():
    orphan = USER_FSTAB + marker("/mnt/data") + "\n# nas:/ /mnt/data nfs vers=3 0 0\n"
    with pytest.raises(FstabConflict, match="no fstab line under it"):
        edit(orphan, "/mnt/data", LINE)
    broken = USER_FSTAB + marker("/mnt/data") + "\nnas:/ /mnt/data\n"
    with pytest.raises(FstabConflict, match="broken"):
        edit(broken, "/mnt/data", LINE)
    twice = edit(USER_FSTAB, "/mnt/data", LINE) + "other:/x /mnt/data nfs defaults 0 0\n"
    with pytest.raises(FstabConflict, match="2 times"):
        edit(twice, "/mnt/data", LINE)
    moved = USER_FSTAB + marker("/mnt/data") + "\n\n" + LINE + "\n"
    with pytest.raises(FstabConflict, match="not right under"):
        edit(moved, "/mnt/data", LINE)


def test_mount_points_with_blanks_use_fstab_escapes():
    spaced = entry_line("nas:/", "/mnt/my data", "nfs", "hard")
    assert spaced == "nas:/ /mnt/my\\040data nfs hard 0 0"
    text = edit("", "/mnt/my data", spaced)
    assert find(text, "/mnt/my data").managed == 1
    assert find(text, "/mnt/my").entries == []


fstab_lines = st.text(alphabet=st.characters(exclude_characters="\n\r", exclude_categories=("Cs",)), max_size=60)


@given(st.lists(fstab_lines.filter(lambda s: "/mnt/data" not in s and "gpunode" not in s), max_size=12))
def test_other_lines_are_kept_byte_for_byte(others):
    text = "\n".join(others) + ("\n" if others else "")
    added = edit(text, "/mnt/data", LINE)
    assert added.startswith(text)
    assert edit(added, "/mnt/data", None) == text
