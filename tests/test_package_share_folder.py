"""The package share's folder on the controller: one that cannot be used turns the share off for the host with one
note and its fix (not a note per file after the host downloaded and sent everything back for nothing)."""

from __future__ import annotations

from gpunode.pkgshare.store import PackageStore
from gpunode.steps.package_share import _size


def test_a_folder_that_is_a_file_or_under_one_is_a_problem(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    assert "cannot be created" in PackageStore(afile).problem()
    assert "cannot be created" in PackageStore(afile / "sub").problem()
    fresh = tmp_path / "a" / "b"
    assert PackageStore(fresh).problem() == "" and fresh.is_dir()


def test_small_sizes_are_not_zero_mib():
    assert _size(917 << 10) == "917 KiB" and _size(47 << 20) == "47 MiB"
