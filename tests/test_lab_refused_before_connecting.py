"""Issue 27, item 4: bad input is refused before any host is contacted: exit 2, file:line, a fix, and the lab
host's sshd saw no connection at all. Guards: gpunode/playbook/validate.py (Jinja syntax at load; templated
arguments rendered with what the controller knows, before the connections open), gpunode/yamlfile.py (encodings),
gpunode/steps/arguments.py (`names: 5` is not a list)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

CASES = {
    "a number for a list": (b"steps:\n  - name: pkgs\n    packages: {names: 5}\n", [],
                            r"play\.yml:3: packages\.names must be a list, got a number 5"),
    "a Jinja syntax error in when": (b"steps:\n  - name: x\n    when: 'flag ==='\n    command: {cmd: 'true'}\n", [],
                                     r"play\.yml:3: Jinja syntax error in when"),
    "a Jinja syntax error in a template": (b"steps:\n  - name: x\n    command: {cmd: 'echo {{ x '}\n", [],
                                           r"play\.yml:3: Jinja syntax error in command\.cmd"),
    "a Jinja syntax error in failed_when": (b"steps:\n  - command: {cmd: 'true'}\n    register: r\n"
                                            b"    failed_when: r.rc >\n", [],
                                            r"play\.yml:4: Jinja syntax error in failed_when"),
    "a binary playbook": (b"steps:\n  - command: {cmd: 'echo caf\xe9'}\n\x00\x01", [],
                          r"play\.yml:2: not UTF-8 text: byte 0xe9"),
    "--var driver_branch=abc": (b"steps:\n  - include: gpu-node\n", ["--var", "driver_branch=abc"],
                                r"gpu-node\.yml:\d+: .*driver_branch"),
    "--var kernel_policy=sometimes": (b"steps:\n  - include: gpu-node\n", ["--var", "kernel_policy=sometimes"],
                                      r"gpu-node\.yml:\d+: kernel_headers\.policy must be one of .*, got 'sometimes' "
                                      r"\(the value comes from the variable kernel_policy"),
}


def test_bad_input_is_refused_before_any_connection(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    since = host.run_inside("sleep 1.2; date +%s").stdout.strip()  # after the lab's own readiness probe
    for name, (text, args, expected) in CASES.items():
        book = tmp_path / "play.yml"
        book.write_bytes(text)
        result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), *args)
        assert result.code == 2, (name, result.output)
        assert re.search(expected, " ".join(result.output.split())), (name, result.output)  # wrapped lines joined
        assert "fix:" in result.output and "Traceback" not in result.output, (name, result.output)
    sshd = "journalctl --sync; journalctl -u ssh --since @{} --no-pager -o cat"
    log = host.run_inside(sshd.format(since)).stdout
    assert "Accepted" not in log and "Connection" not in log and "preauth" not in log, log
    # the control: a good run is seen by the same log
    book.write_text("steps:\n  - command: {cmd: 'true', creates: /etc/hostname}\n")
    assert run_cli("provision", "-i", str(inventory), "--playbook", str(book)).code == 0
    assert "Accepted publickey for gpunode" in host.run_inside(sshd.format(since)).stdout
