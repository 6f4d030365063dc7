"""`user-data --format mime` read by cloud-init's own code: Debian's cloud-init package on a lab host.

AWS Batch takes a launch template's user data only as a MIME multi-part archive (gpunode/image/mime.py has the
sources). Here Debian's cloud-init (installed from the lab's mirror with apt) splits gpunode's archive with
`cloudinit.user_data.UserDataProcessor` (what its init stage runs on user data), its shell-script part handler writes
the `text/x-shellscript` part where the `scripts_user` module runs it from, and that script, run as root with the host
cut off from everything outside the lab, fetches the bundle from the lab bridge and converges base.yml.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_user_data_lab import PRESENT_PACKAGES, offline, serve

pytestmark = pytest.mark.lab
# Debian's cloud-init from the mirror the lab uses (the host has no package lists yet)
INSTALL_CLOUD_INIT = ("apt-get update -q >/tmp/apt.log 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y "
                      "-q --no-install-recommends cloud-init >>/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }")

# Runs inside the host with Debian's cloud-init: split the archive, hand the script part to cloud-init's handler.
SPLIT = r"""
import json, sys
from cloudinit import helpers, user_data
from cloudinit.handlers.shell_script import ShellScriptPartHandler

paths = helpers.Paths({"cloud_dir": "/var/lib/ci-test", "run_dir": "/run/ci-test"})
message = user_data.UserDataProcessor(paths).process(open(sys.argv[1], "rb").read())
parts = [part for part in message.walk() if not part.is_multipart()]
handler = ShellScriptPartHandler(paths)
for part in parts:
    if part.get_content_type() == "text/x-shellscript":
        handler.handle_part(None, part.get_content_type(), part.get_filename(), part.get_payload(decode=True).decode(),
                            None)
print(json.dumps({"parts": [[p.get_content_type(), p.get_filename()] for p in parts],
                  "scripts": handler.script_dir}))
"""


def test_cloud_init_splits_the_mime_user_data_and_runs_its_script(lab, fresh_host, tmp_path: Path) -> None:
    bundle_dir = tmp_path / "served"
    bundle_dir.mkdir()
    installed = fresh_host.run_inside(f"{INSTALL_CLOUD_INIT} && dpkg-query -W -f '${{Version}}' cloud-init",
                                      timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    with serve(bundle_dir, str(lab.network.gateway)) as url:
        made = run_cli("user-data", "--playbook", "playbooks/base.yml", "--var", PRESENT_PACKAGES, "--format", "mime",
                       "--bundle-url", f"{url}/bundle.tar.xz", "--bundle-out", str(bundle_dir / "bundle.tar.xz"),
                       "--output", str(tmp_path / "user-data.mime"))
        assert made.code == 0, made.output
        archive = (tmp_path / "user-data.mime").read_text()
        assert len(archive.encode()) < 16 * 1024  # fits EC2's user data
        assert archive.startswith('Content-Type: multipart/mixed; boundary="==GPUNODE-USER-DATA=="\nMIME-Version: 1.0')
        (fresh_host.root / "root" / "user-data.mime").write_text(archive)
        (fresh_host.root / "root" / "split.py").write_text(SPLIT)
        split = fresh_host.run_inside("python3 /root/split.py /root/user-data.mime")
        assert split.returncode == 0, split.stderr
        found = json.loads(split.stdout)
        assert found["parts"] == [["text/x-shellscript", "gpunode-1-shell"]], found  # one part, the right type
        script = f"{found['scripts']}/gpunode-1-shell"
        mode = fresh_host.run_inside(f"stat -c %a {script} && head -c 12 {script}").stdout
        assert mode == "700\n#!/bin/bash\n"  # written executable, as scripts_user runs it
        with offline(lab, fresh_host):
            ran = fresh_host.run_inside(script, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert fresh_host.run_inside("cat /var/lib/gpunode/first-boot/status").stdout.strip() == "ok"
    version = installed.stdout.strip()
    print(f"Debian cloud-init {version}: 1 part (text/x-shellscript), script ran: ok")
