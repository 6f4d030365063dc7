"""Packer's "AMIs were created" block is printed once (issue 27: the manifest post-processor repeats the artifact,
and the demo's log showed the block twice). Run through real Packer (Debian's 1.6.6) with a null builder."""

from __future__ import annotations

import shutil

import pytest

from gpunode.image import packer as packer_cli
from gpunode.image.build import _printer


@pytest.mark.skipif(not shutil.which("packer"), reason="packer is not installed")
def test_the_artifact_block_is_printed_once(tmp_path):
    (tmp_path / "t.pkr.hcl").write_text(
        'source "null" "x" {\n  communicator = "none"\n}\n'
        'build {\n  sources = ["source.null.x"]\n  post-processor "manifest" {\n    output = "m.json"\n  }\n}\n')
    var_file = tmp_path / "v.pkrvars.hcl"
    var_file.write_text("")
    printed: list[str] = []
    run = packer_cli.build(packer_cli.find_packer(), tmp_path, var_file, _printer(printed.append))
    assert run.exit_code == 0, printed
    assert len(run.artifacts.builds["null.x"]) == 2  # the builder's artifact and the manifest's: Packer lists both
    listed = [line for line in printed if line.startswith("--> null.x:")]
    assert listed == ["--> null.x: Did not export anything. This is the null builder"], printed
