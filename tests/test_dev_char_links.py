"""The /dev/char check run for real: gpunode/_scripts/dev_char_links.sh over a folder of real character device nodes
(mknod, as root) and links, the way runc resolves them (the link must lead to a node with the same numbers)."""

from __future__ import annotations

import os
import subprocess

import pytest

from gpunode.parsers.dev_char import link_problems, link_states
from gpunode.scripts import script_text

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root")


def _node(root, path, major, minor):
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(full, 0o600 | 0o020000, os.makedev(major, minor))  # S_IFCHR


def _run(root, *extra):
    return subprocess.run(["sh", "-c", script_text("dev_char_links.sh"), "dev-char-links", str(root), *extra],
                          capture_output=True, text=True)


@pytest.fixture
def dev(tmp_path):
    _node(tmp_path, "dev/nvidia0", 195, 0)
    _node(tmp_path, "dev/nvidiactl", 195, 255)
    _node(tmp_path, "dev/nvidia-uvm", 509, 0)
    _node(tmp_path, "dev/nvidia-caps/nvidia-cap1", 234, 1)
    (tmp_path / "dev/char").mkdir()
    return tmp_path


def test_each_device_is_reported_with_its_numbers(dev):
    os.symlink("../nvidia0", dev / "dev/char/195:0")              # right
    os.symlink("../nvidia0", dev / "dev/char/195:255")            # leads to another device
    os.symlink("../nvidia-caps/nvidia-cap1", dev / "dev/char/234:1")
    result = _run(dev)
    assert result.returncode == 0, result.stderr
    assert link_states(result.stdout) == {
        "/dev/nvidia0": ("195:0", "ok"), "/dev/nvidiactl": ("195:255", "wrong"),
        "/dev/nvidia-uvm": ("509:0", "missing"), "/dev/nvidia-caps/nvidia-cap1": ("234:1", "ok")}
    assert link_problems(result.stdout) == ["/dev/char/509:0 is missing (for /dev/nvidia-uvm)",
                                            "/dev/char/195:255 does not lead to /dev/nvidiactl (for /dev/nvidiactl)"]
    verify = _run(dev, "verify")
    assert verify.returncode == 1 and "missing or wrong" in verify.stderr


def test_verify_passes_once_every_link_is_there(dev):
    for name, mm in (("nvidia0", "195:0"), ("nvidiactl", "195:255"), ("nvidia-uvm", "509:0"),
                     ("nvidia-caps/nvidia-cap1", "234:1")):
        os.symlink(f"../{name}", dev / f"dev/char/{mm}")
    verify = _run(dev, "verify")
    assert verify.returncode == 0 and link_problems(verify.stdout) == []
    assert len(link_states(verify.stdout)) == 4


def test_a_dangling_link_is_wrong_and_no_device_means_no_lines(tmp_path, dev):
    os.symlink("../gone", dev / "dev/char/195:0")
    assert link_states(_run(dev).stdout)["/dev/nvidia0"] == ("195:0", "wrong")
    empty = tmp_path / "empty"
    (empty / "dev").mkdir(parents=True)
    result = _run(empty, "verify")
    assert result.returncode == 0 and result.stdout == ""


def test_verify_gpu_reads_the_section_and_names_the_missing_link(dev):
    """The evidence script verify-gpu and collect send carries the same section; a missing link is a warning."""
    from gpunode.scripts import gpu_evidence_script
    from gpunode.verify.checks.host import host_checks
    from gpunode.verify.evidence import Evidence
    from gpunode.verify.host_evidence import split_sections

    os.symlink("../nvidia0", dev / "dev/char/195:0")
    text = gpu_evidence_script()
    assert text.count('echo "@@evidence dev-char"') == 1 and text.rstrip().endswith('echo "@@evidence end"')
    _, sections = split_sections("facts\n@@evidence dev-char\n" + _run(dev).stdout + "@@evidence end\n")
    finding, = [f for f in host_checks(Evidence(dev_char=sections["dev-char"])) if f.id == "dev-char-links-missing"]
    assert finding.severity == "warning" and "/dev/char/195:255 is missing (for /dev/nvidiactl)" in finding.evidence
    assert "create-dev-char-symlinks --create-all" in finding.remedy
    assert not [f for f in host_checks(Evidence(dev_char="node /dev/nvidia0 195:0 ok\n"))
                if f.id == "dev-char-links-missing"]
