"""Issue 27 on real lab hosts: `| quote` keeps a hostile value text in `cmd` and `unless` (item 2), and Ansible's
task keys `register`, `ignore_errors`, `failed_when` and `changed_when` (item 3) do what an Ansible user expects."""

from __future__ import annotations

import pytest

from tests.test_lab_ansible_habits import host_of, provision

pytestmark = pytest.mark.lab

EVIL = "$(touch /tmp/pwned); id"


def test_quote_keeps_a_hostile_value_text_in_cmd_and_unless(lab, fresh_host, tmp_path):
    playbook = """steps:
  - name: echo evil
    command:
      cmd: "echo {{ evil | quote }} > /root/t27-evil; echo {{ evil | quote }}"
      unless: "grep -qxF -- {{ evil | quote }} /root/t27-evil"
"""
    first, report = provision(lab, [fresh_host], tmp_path, playbook, "-v", evil=EVIL)
    assert first.code == 0, first.output
    assert host_of(report, fresh_host.name)["steps"][0]["status"] == "changed"
    assert f"| {EVIL}" in first.output  # -v shows the command's output: the literal text
    assert fresh_host.run_inside("cat /root/t27-evil").stdout == EVIL + "\n"
    again, report = provision(lab, [fresh_host], tmp_path, playbook, evil=EVIL)  # `unless` ran, with the text
    assert again.code == 0 and host_of(report, fresh_host.name)["steps"][0]["status"] == "ok", again.output
    assert fresh_host.run_inside("test -e /tmp/pwned").returncode == 1, "the value ran as a command"


TASK_KEYS = """steps:
  - name: read a missing file
    command: {cmd: "cat /etc/t27-absent"}
    register: missing
    ignore_errors: true
  - name: record the failure
    when: missing is failed and missing.rc == 1
    file: {path: /root/t27-rc, content: "rc={{ missing.rc }} err={{ missing.stderr_lines | length }}\\n"}
  - name: read-only query
    command: {cmd: "echo hello; echo warn >&2"}
    register: hello
    changed_when: false
  - name: use its output
    file: {path: /root/t27-hello, content: "{{ hello.stdout }}|{{ hello.stderr }}|{{ hello.changed }}\\n"}
  - name: grep, where exit 1 is an answer
    command: {cmd: "grep -q nothing-here /etc/hostname"}
    register: grep
    failed_when: grep.rc not in [0, 1]
    changed_when: grep.rc == 0
  - name: a success that is a failure
    command: {cmd: "echo ERROR: bad"}
    register: out
    failed_when: "'ERROR' in out.stdout"
    ignore_errors: true
  - name: after
    file: {path: /root/t27-after, content: "{{ out is failed }} {{ grep.rc }} {{ grep is changed }}\\n"}
"""


def test_register_ignore_errors_failed_when_changed_when(lab, fresh_host, tmp_path):
    run, report = provision(lab, [fresh_host], tmp_path, TASK_KEYS, "--junit", str(tmp_path / "r.xml"))
    assert run.code == 0, run.output
    steps = {s["name"]: s for s in host_of(report, fresh_host.name)["steps"]}
    assert steps["read a missing file"]["status"] == "failed" and steps["read a missing file"]["ignored"]
    assert "ignored" in steps["read a missing file"]["message"]
    assert steps["record the failure"]["status"] == "changed"
    assert steps["read-only query"]["status"] == "ok"                  # changed_when: false
    assert steps["grep, where exit 1 is an answer"]["status"] == "ok"  # exit 1: not failed, not changed
    assert steps["a success that is a failure"]["status"] == "failed"  # failed_when on exit 0
    assert steps["after"]["status"] == "changed"
    assert host_of(report, fresh_host.name)["status"] == "changed"     # ignored failures do not fail the host
    assert fresh_host.run_inside("cat /root/t27-rc").stdout == "rc=1 err=1\n"
    assert fresh_host.run_inside("cat /root/t27-hello").stdout == "hello|warn|False\n"
    assert fresh_host.run_inside("cat /root/t27-after").stdout == "True 1 False\n"
    assert "<failure" not in (tmp_path / "r.xml").read_text()            # as Ansible's junit callback: ignored
    check, report = provision(lab, [fresh_host], tmp_path, TASK_KEYS, "--check")
    assert check.code == 0, check.output
    steps = {s["name"]: s for s in host_of(report, fresh_host.name)["steps"]}
    assert steps["read-only query"]["status"] == "ok"  # changed_when: false holds in check mode too
    for name in ("record the failure", "use its output", "after"):  # they read output nobody has seen yet
        assert steps[name]["status"] == "would-change" and "unknown until run" in steps[name]["message"], steps[name]


def test_failed_when_stops_the_host_without_ignore_errors(lab, fresh_host, tmp_path):
    run, report = provision(lab, [fresh_host], tmp_path, """steps:
  - name: check the disk
    command: {cmd: "echo usage 97%"}
    register: disk
    failed_when: "(disk.stdout | regex_search('[0-9]+') | int) > 90"
  - name: never reached
    file: {path: /root/t27-never, content: "x\\n"}
""")
    assert run.code == 1, run.output
    host = host_of(report, fresh_host.name)
    assert host["failed_step"] == "check the disk" and "failed_when is true" in host["error"]
    assert [s["name"] for s in host["steps"]] == ["check the disk"]
    assert fresh_host.run_inside("test -e /root/t27-never").returncode == 1


READ_ONLY = """steps:
  - name: read the version
    command: {cmd: "cat /etc/debian_version"}
    register: version
    changed_when: false
    check_mode: false
  - name: record it
    file: {path: /root/t27-version, content: "{{ version.stdout }}\\n"}
"""


def test_check_mode_false_runs_a_read_only_query_in_check(lab, fresh_host, tmp_path):
    """Ansible's idiom: a query marked `check_mode: false` runs in --check too, so what reads its result is predicted
    from the real answer, and --check and the real run agree."""
    version = fresh_host.run_inside("cat /etc/debian_version").stdout.strip()
    check, report = provision(lab, [fresh_host], tmp_path, READ_ONLY, "--check")
    assert check.code == 0, check.output
    steps = {s["name"]: s for s in host_of(report, fresh_host.name)["steps"]}
    assert steps["read the version"]["status"] == "ok"
    assert steps["record it"]["status"] == "would-change" and version in "".join(steps["record it"]["diffs"])
    assert fresh_host.run_inside("test -e /root/t27-version").returncode == 1  # --check wrote nothing
    real, report = provision(lab, [fresh_host], tmp_path, READ_ONLY)
    assert real.code == 0 and [s["status"] for s in host_of(report, fresh_host.name)["steps"]] == ["ok", "changed"]
    again, report = provision(lab, [fresh_host], tmp_path, READ_ONLY, "--check")
    assert [s["status"] for s in host_of(report, fresh_host.name)["steps"]] == ["ok", "ok"], again.output
