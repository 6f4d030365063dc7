"""The `json` step on a real lab host: the host's own python3 reads the merged file, the user's keys intact; a
converged re-run is the lock session alone (no write); check mode shows a diff and changes nothing; a file that is
not JSON fails the step and stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab  # real lab hosts: never in a `-m "not lab"` run

PATH = "/etc/t21j/daemon.json"
SEED = '{\n    "data-root": "/var/lib/docker",\n    "log-opts": {"max-size": "10m"},\n    "zz-user": [1, 2]\n}\n'
PLAYBOOK = f"""steps:
  - name: docker settings
    json:
      path: {PATH}
      set: {{log-level: warn, log-opts: {{max-file: "3"}}, live-restore: true}}
      mode: '0640'
"""
WANTED = {"data-root": "/var/lib/docker", "log-opts": {"max-size": "10m", "max-file": "3"}, "zz-user": [1, 2],
          "log-level": "warn", "live-restore": True}
READ = f"python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' {PATH}"


def provision(lab, host, tmp_path: Path, *args: str):
    """`gpunode provision` of PLAYBOOK on the host; (cli result, the JSON report's host entry)."""
    book = tmp_path / "play.yml"
    book.write_text(PLAYBOOK)
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    result = run_cli("provision", "-i", str(host_inventory(lab, [host], tmp_path / "inv.yml")), "--playbook",
                     str(book), "--json-report", str(report), "--log-dir", str(tmp_path / "logs"), *args)
    return result, json.loads(report.read_text())["hosts"][0] if report.exists() else {}


def file_identity(host) -> str:
    """Content hash, inode and change time of the file, and the backups next to it: any write changes it."""
    return host.run_inside(f"sha256sum {PATH}; stat -c '%i %Z %a' {PATH}; ls {PATH}.*.gpunode.bak 2>/dev/null; "
                           "true").stdout


def test_json_merge_is_read_by_the_hosts_python_and_a_rerun_writes_nothing(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    host.run_inside(f"rm -rf /etc/t21j && mkdir -p /etc/t21j && printf '%s' '{SEED}' > {PATH} && chmod 0644 {PATH}")

    before = file_identity(host)
    check, report = provision(lab, host, tmp_path, "--check")
    assert check.code == 0 and report["steps"][0]["status"] == "would-change", check.output
    assert '+    "log-level": "warn",' in check.stdout and '-    "log-opts": {"max-size": "10m"},' in check.stdout
    assert file_identity(host) == before  # check mode wrote nothing

    first, report = provision(lab, host, tmp_path)
    assert first.code == 0 and report["steps"][0]["status"] == "changed", first.output
    seen = host.run_inside(READ)
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout) == WANTED
    assert list(json.loads(seen.stdout)) == list(WANTED)  # the user's keys first, in their order
    assert host.run_inside(f"stat -c %a {PATH}").stdout.strip() == "640"
    assert host.run_inside(f"cat {PATH}.*.gpunode.bak").stdout == SEED  # the backup is the user's file
    assert host.run_inside(f"cat {PATH}").stdout.startswith('{\n    "data-root"')  # 4-space indentation kept

    written = file_identity(host)
    again, report = provision(lab, host, tmp_path)
    assert again.code == 0, again.output
    assert report["changed"] == 0 and report["steps"][0]["status"] == "ok", report["steps"]
    assert report["exec_count"] == 1, report["commands"]  # the lock session (facts + probe) and nothing else
    assert file_identity(host) == written


def test_a_file_that_is_not_json_fails_and_is_left_as_it_was(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[1]]
    broken = '{"data-root": "/var/lib/docker",\n  "log-opts": {"max-size": "10m"\n}\n'
    host.run_inside(f"rm -rf /etc/t21j && mkdir -p /etc/t21j && printf '%s' '{broken}' > {PATH}")
    before = file_identity(host)
    for mode in ([], ["--check"]):
        result, report = provision(lab, host, tmp_path, *mode)
        assert result.code == 1, result.output
        said = " ".join(result.stdout.split())
        assert f"{host.name} at step 'docker settings': {PATH} is not valid JSON (line 4, column 1" in said, said
        assert "it was left untouched" in said and f"fix: fix {PATH} by hand" in said
        assert report["status"] == "failed" and report["steps"][0]["status"] == "failed"
        assert file_identity(host) == before
