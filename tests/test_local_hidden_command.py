"""A sensitive step on `localhost` (no SSH): its command travels on stdin here too, so no process list of this
machine shows it (gpunode/connection/base.py `guard`); the command still gets its own input."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from gpunode.connection.local import LocalConnection
from gpunode.connection.transcript import Transcript
from gpunode.inventory import Host

SECRET = "loc27-9f86d081884c7d65"  # noqa: S105 - a test value


def _sample(stop: threading.Event, seen: list[bytes]) -> None:
    while not stop.is_set():
        for proc in Path("/proc").glob("[0-9]*"):
            for name in ("cmdline", "environ"):
                with contextlib.suppress(OSError):  # a process that has ended
                    seen.append((proc / name).read_bytes())
        time.sleep(0.05)


def test_a_sensitive_local_command_is_on_no_process_list(tmp_path):
    conn = LocalConnection(Host(name="localhost", address="127.0.0.1", local=True), Transcript("localhost"))
    conn.sensitive = True
    out = tmp_path / "out"
    stop, seen = threading.Event(), []
    sampler = threading.Thread(target=_sample, args=(stop, seen), daemon=True)
    sampler.start()
    try:
        result = conn.run(f"sleep 1; echo {SECRET} > {out}; cat", stdin=b"its own input\n", sudo=False)
    finally:
        stop.set()
        sampler.join(10)
    assert result.ok and result.stdout == "its own input\n"
    assert out.read_text() == SECRET + "\n"
    samples = b"\n".join(seen)
    assert b"gpunode-hidden" in samples and SECRET.encode() not in samples


def test_a_registered_secret_is_masked_in_the_verbose_output_of_a_later_step(tmp_path):
    """Trial of issues 26-28: what a sensitive step printed, registered, was masked in reports and logs but shown in
    clear by `-v` when a later step printed it (the live output lines were not redacted)."""
    from tests.conftest import run_cli

    book = tmp_path / "p.yml"
    book.write_text("name: p\nsteps:\n  - name: get\n    no_log: true\n"
                    f"    command: {{cmd: 'echo {SECRET}'}}\n    register: s\n    changed_when: false\n"
                    "  - name: show\n    command: {cmd: \"echo {{ s.stdout | quote }}\"}\n    changed_when: false\n")
    run = run_cli("provision", "-H", "localhost", "--playbook", str(book), "-v", "--log-dir", str(tmp_path / "logs"),
                  "--json-report", str(tmp_path / "r.json"))
    assert run.code == 0, run.output
    assert "[localhost]   | ********" in run.output and SECRET not in run.output
    assert SECRET not in (tmp_path / "r.json").read_text()
    assert not [p for p in (tmp_path / "logs").rglob("*") if p.is_file() and SECRET in p.read_text()]
