"""dev/demo's own lines around lab-up, run as `bash dev/demo > log 2>&1` runs them (issue 27: `tee /dev/stderr`
reopened the log and truncated it: everything before lab-up became NUL bytes). lab-up is a stand-in here."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO

STUB = """set -euo pipefail
gpunode=lab_stub
lab_stub() { echo "demo-h1  10.231.1.11  bookworm"; echo "nfs server: 10.231.1.250  export: /export"; }
echo "== earlier output of the demo (dev/setup...)"
"""


def demo_lab_lines() -> str:
    """The demo's lines from the lab banner up to the NFS server's address."""
    text = (REPO / "dev" / "demo").read_text()
    start = text.index('echo "== lab:')
    end = text.index("\n", text.index("nfs_server=", start))
    return text[start:end + 1]


def test_a_redirected_demo_log_keeps_everything_before_lab_up(tmp_path):
    log = tmp_path / "log"
    script = STUB + demo_lab_lines() + 'echo "nfs: $nfs_server"\n'
    with log.open("w") as out:
        subprocess.run(["bash", "-c", script], stdout=out, stderr=subprocess.STDOUT, check=True, timeout=30)
    data = log.read_bytes()
    assert b"\0" not in data, data
    text = data.decode()
    assert text.startswith("== earlier output of the demo") and "demo-h1  10.231.1.11" in text
    assert text.rstrip().endswith("nfs: 10.231.1.250")
