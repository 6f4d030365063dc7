"""A full disk where the kernel's modules go, during the install from the module cache: the step fails naming the
space left, and a rerun with space installs whole modules (issue 37: Debian 12's dkms 3.0.10 copies the module with
an unchecked `cp`, so the install "succeeded" with a cut-short module, `dkms status` said "installed (WARNING! Diff
between built and installed module!)", the check read it as installed, and reruns said ok).

Real dkms on a lab host, with the small DKMS module of tests/data/dkms-hello: built once and cached, then removed
from the host; /lib/modules/<kernel>/updates becomes a tmpfs too small for the module and the host installs from the
cache. Guards: gpunode/modcache/dkms_shell.py `installed_check`, `uninstall_if_diverged`; gpunode/parsers/dkms.py
`diverged`.
"""

from __future__ import annotations

import json

import pytest

from bench.ready import HELLO_PLAYBOOK, prepare_hello
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab
MODULE, VERSION = "gpunode-hello", "1.0"


def _provision(inventory, playbook, kernel, cache, report):
    return run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var", f"hello_kernel={kernel}",
                   "--var", f"module_cache={cache}", "--json-report", str(report), timeout=900)


def _builds(host) -> int:
    log = host.root / "var/log/gpunode-hello-builds"
    return len(log.read_text().split()) if log.exists() else 0


@pytest.mark.slow  # dkms and a cloud kernel's headers from the mirror: 40-90 s
def test_a_full_disk_during_the_cache_install_fails_the_step_and_a_rerun_installs_whole_modules(
        lab, fresh_host, tmp_path):
    kernel = prepare_hello(fresh_host)
    playbook = tmp_path / "hello.yml"
    playbook.write_text(HELLO_PLAYBOOK)
    cache = tmp_path / "cache"
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    first = _provision(inventory, playbook, kernel, cache, tmp_path / "r1.json")
    assert first.code == 0 and _builds(fresh_host) == 1, first.output

    updates = f"/lib/modules/{kernel}/updates"
    fill = (f"dkms remove {MODULE}/{VERSION} -k {kernel} && dpkg -r gpunode-dkms-{MODULE}-{kernel} && "
            f"rm -rf {updates} && mkdir -p {updates} && mount -t tmpfs -o size=8k tmpfs {updates} && "
            f"(dd if=/dev/zero of={updates}/filler bs=1k 2>/dev/null; true)")
    prepared = fresh_host.run_inside(fill)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    try:
        full = _provision(inventory, playbook, kernel, cache, tmp_path / "r2.json")
        assert full.code == 1, full.output
        (host,) = json.loads((tmp_path / "r2.json").read_text())["hosts"]
        (failed,) = [s for s in host["steps"] if s["status"] == "failed"]
        said = f"{failed['message']} {host['error']} {host['fix']}"
        assert "free space where the modules go:  0 " in said and updates in said, said
        assert "the module files in the kernel tree are not whole" in said and "then run again" in host["fix"], said
        status = fresh_host.run_inside(f"dkms status -m {MODULE} -v {VERSION} -k {kernel}").stdout
        assert status.strip() and not status.rstrip().endswith(": installed"), status  # what dkms says: not whole
    finally:
        fresh_host.run_inside(f"umount {updates}")

    again = _provision(inventory, playbook, kernel, cache, tmp_path / "r3.json")
    assert again.code == 0, again.output
    assert _builds(fresh_host) == 1  # from the cache, no compile
    status = fresh_host.run_inside(f"dkms status -m {MODULE} -v {VERSION} -k {kernel}").stdout
    assert status.strip() == f"{MODULE}/{VERSION}, {kernel}, x86_64: installed", status
    whole = fresh_host.run_inside(f"cmp /var/lib/dkms/{MODULE}/{VERSION}/{kernel}/x86_64/module/gpunode_hello.ko "
                                  f"{updates}/dkms/gpunode_hello.ko")
    assert whole.returncode == 0, whole.stdout + whole.stderr
