"""Secrets by declaration (must-show 5 of issue 16): the content of a `sensitive: true` step appears in no log,
report, diff or console output, whatever its variables are called; values may come from `lookup('env', ...)`
or `lookup('file', ...)` instead of the inventory. Guards: gpunode/runner/host_run.py (`_hide_values`, hidden
diffs and failure output), gpunode/connection/base.py (output of a sensitive step neither logged nor streamed),
gpunode/connection/guard.py (its command not written into the host's record).
"""

from __future__ import annotations

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

TOKEN = "tok-4711-visible-nowhere"  # noqa: S105 - a test value
KEYFILE = "keyfile-0815-visible-nowhere"

PLAYBOOK = """steps:
  - name: app config
    sensitive: true
    file: {path: /root/app.conf, content: "user=app\\ntoken={{ lookup('env', 'APP_TOKEN') }}\\n"}
  - name: app line
    no_log: true
    line: {path: /root/app.env, line: "KEY={{ lookup('file', keyfile) }}", create: true}
  - name: app command
    sensitive: true
    command: {cmd: "echo using {{ lookup('env', 'APP_TOKEN') }}; cat /root/app.conf; exit {{ code }}"}
"""


def test_a_sensitive_steps_content_appears_nowhere(lab, fresh_host, tmp_path):
    keyfile = tmp_path / "key.txt"
    keyfile.write_text(KEYFILE + "\n")
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", keyfile=str(keyfile))
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    shown = []
    for attempt, code, flags in (("check", 0, ["--check"]), ("apply", 3, ["-v"]), ("again", 0, ["-v"])):
        run = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var", f"code={code}",
                      "--json-report", str(tmp_path / f"{attempt}.json"), "--junit", str(tmp_path / f"{attempt}.xml"),
                      "--log-dir", str(tmp_path / "logs" / attempt), *flags, env={"APP_TOKEN": TOKEN})
        shown.append(run.output)
        assert run.code == (1 if code else 0), run.output
    # the effects are real: the secrets reached the host
    assert fresh_host.run_inside("cat /root/app.conf").stdout == f"user=app\ntoken={TOKEN}\n"
    assert fresh_host.run_inside("cat /root/app.env").stdout == f"KEY={KEYFILE}\n"
    everything = "".join(shown) + "".join(p.read_text() for p in tmp_path.rglob("*") if p.suffix in
                                          (".log", ".json", ".xml"))
    assert "app command" in everything and "hidden" in everything  # the steps are reported, their content not
    for secret in (TOKEN, KEYFILE):
        assert secret not in everything
    record = fresh_host.run_inside("cat /run/lock/gpunode.lock.d/* 2>/dev/null; journalctl --no-pager -o cat")
    assert TOKEN not in record.stdout
