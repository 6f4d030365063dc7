"""Issue 27, item 1: a sensitive `command` step's command, `unless` and `creates` are on no host process's command
line or environment while they run (nor in sudo's log), and the same run's -v output, host log, JSON and JUnit
reports hold them nowhere. Guards: gpunode/connection/guard.py (a hidden command reaches its shell on stdin and runs
by `eval`), gpunode/steps/command.py (the command is shell text, not `sh -c TEXT`; `unless` in a here-document).
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

SECRET = "tok27-d41d8cd98f00b204"  # noqa: S105 - a test value

PLAYBOOK = """steps:
  - name: secret command
    no_log: true
    command:
      cmd: "sleep 5; echo {{ lookup('env', 'APP_TOKEN') }} > /root/t27-secret.out"
      unless: "sleep 4; [ -e /root/t27-never-{{ lookup('env', 'APP_TOKEN') }} ]"
      creates: "/root/t27-marker-{{ lookup('env', 'APP_TOKEN') }}"
  - name: read it back
    no_log: true
    command: {cmd: "cat /root/t27-secret.out"}
    register: readback
  - name: use what a sensitive step printed
    file: {path: /root/t27-copy, content: "{{ readback.stdout }}\n"}
"""

# Every process's argv and environment, NUL-separated, as root inside the host (the sampler's own argv holds no
# secret: it only reads /proc).
SAMPLE = "for p in /proc/[0-9]*; do cat $p/cmdline $p/environ 2>/dev/null; echo; done"


def _sample(host, stop: threading.Event, seen: list[str]) -> None:
    while not stop.is_set():
        result = host.run_inside(SAMPLE)
        seen.append(result.stdout)
        time.sleep(0.2)


def test_a_sensitive_command_is_on_no_process_list(lab, fresh_host, tmp_path):
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")  # ansible_user gpunode + sudo (become)
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    stop, seen = threading.Event(), []
    sampler = threading.Thread(target=_sample, args=(fresh_host, stop, seen), daemon=True)
    sampler.start()
    try:
        run = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "-v",
                      "--json-report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
                      "--log-dir", str(tmp_path / "logs"), env={"APP_TOKEN": SECRET})
    finally:
        stop.set()
        sampler.join(30)
    assert run.code == 0, run.output
    # it ran, for real, with the secret: the file holds it
    assert fresh_host.run_inside("cat /root/t27-secret.out").stdout.strip() == SECRET
    assert fresh_host.run_inside("cat /root/t27-copy").stdout.strip() == SECRET  # its diff is masked (below)
    # the sampler saw the step's processes (the sleeps of unless and cmd) and never the secret
    samples = "\n".join(seen)
    assert "sleep\x004" in samples and "sleep\x005" in samples, "the sampler missed the step"
    assert "gpunode-hidden" in samples  # the shell that runs the command: its argv is a constant
    assert SECRET not in samples
    # the step's name and status still show; its content shows nowhere
    everything = run.output + "".join(p.read_text() for p in tmp_path.rglob("*") if p.suffix in (".log", ".json",
                                                                                                  ".xml"))
    assert "secret command" in everything and "changed" in everything
    assert SECRET not in everything
    # sudo's log (the journal) and the host's run records
    journal = fresh_host.run_inside("journalctl --no-pager -o cat; cat /run/lock/gpunode.lock.d/* 2>/dev/null")
    assert "sudo" in journal.stdout and SECRET not in journal.stdout
