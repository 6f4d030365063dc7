"""Run cases written by hand: a playbook, the host's replies, and what the runner (runner/host_run.py) makes of them.

One YAML file per topic, `tests/runs/<topic>.yaml`, a list of cases:

    - name: handler-runs-once                   # unique in the file
      says: one sentence: the runner rule this case pins down
      check: false                              # --check (default false)
      os: debian-12                             # tests/data/os-release/<os>.txt (default debian-12)
      host: {uid: "1000", user: alice}          # facts.sh's `host` block, where it differs (uid 0, root)
      more_facts: "@@kv pkgmgr\nreboot_required=1\n"   # more facts.sh blocks, at every boot ...
      more_facts_after_reboot: ""               # ... or only until the first reboot, then these
      last_run_facts: true                      # the facts cache holds this host's facts: the probe is guessed
                                                # (a string: the cached facts' more_facts, which differ from now)
      cancelled: true                           # Ctrl-C before the run starts (the cancel event is set)
      playbook: |                               # the playbook, inline
        steps:
          - name: write
            command: {cmd: "touch /x", creates: /x}
      replies:                                  # tests/standin.Reply, first match wins
        - {probe: guards, stdout: ""}           # a probe section, by its name
        - {label: "run: touch /x"}              # a command by its label (regex, whole), exit 0
        - {command: "reboot", exit: 1, stderr: "no"}   # or by its text (regex, searched); interrupt: true = Ctrl-C
      host_vars: {gpunode_scheduler: slurm}      # the host's inventory variables (a rolling run's scheduler)
      clock_step: 1                             # a rolling run: seconds its clock moves per reading (drain waits)
      expect:
        status: changed                         # the host's: ok, changed, would-change, failed, cancelled
        steps: {write: changed}                 # every step (handlers too) in order: its status
        ran: ["run: touch /x"]                  # the commands sent in sessions of their own (not the lock's,
                                                # nor the boot marker), by label, in order
        inside_lock: ["probe of 1 step"]        # the scripts run inside the lock's session (probes), by label
        execs: 2                                # remote execs (the report's count: the lock's exec included)
        notes: ["part of a note"]               # each a part of some note, in any order
        error: "part of the error"
        failed_step: write
        rollout: {gate: passed, resumed: "*"}   # the report's `rollout` record: these keys ("*": any value)

A play with `serial`, `canary` or `gate`, or a host with `gpunode_scheduler`, runs through the real HostRollout
(runner/rolling.py) around the HostRun, its waits on a clock the case moves.

`run_case` runs one case through the real HostRun on a `tests/standin.StandinConnection`; test_run_cases.py
compares the outcome with `expect`.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import yaml

from gpunode.inventory import Host
from gpunode.playbook import load_playbook
from gpunode.report.model import HostOutcome
from gpunode.runner import facts_cache
from gpunode.runner.events import NoEvents
from gpunode.runner.host_run import HostRun
from gpunode.runner.run import host_rollouts
from tests.standin import Reply, StandinConnection, minimal_facts

CASES_DIR = Path(__file__).parent / "runs"
OS_RELEASE_DIR = Path(__file__).parent / "data" / "os-release"

CASE_KEYS = {"name", "says", "check", "os", "host", "more_facts", "more_facts_after_reboot", "last_run_facts",
             "cancelled", "playbook", "replies", "expect", "vars", "host_vars", "clock_step"}
EXPECT_KEYS = {"status", "steps", "ran", "inside_lock", "execs", "notes", "error", "failed_step", "rollout"}


def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.yaml"))


def all_cases() -> list[dict[str, Any]]:
    """Every case of every file, each with its `topic` (the file's stem)."""
    cases = []
    for path in case_files():
        data = yaml.safe_load(path.read_text()) or []
        if not isinstance(data, list):
            raise ValueError(f"{path}: a run case file is a YAML list of cases")
        cases += [{**case, "topic": path.stem} for case in data]
    return cases


def problems(case: dict[str, Any]) -> list[str]:
    """A case's shape: known keys, a name, a `says`, a playbook and an expected status."""
    found = [f"unknown key {k!r}" for k in case if k not in CASE_KEYS | {"topic"}]
    found += [f"no {k!r}" for k in ("name", "says", "playbook", "expect") if not case.get(k)]
    expect = case.get("expect") or {}
    found += [f"unknown expect key {k!r}" for k in expect if k not in EXPECT_KEYS]
    if "status" not in expect or "execs" not in expect:
        found.append("expect needs the host's `status` and its `execs`")
    return found


def run_case(case: dict[str, Any], folder: Path) -> tuple[HostOutcome, StandinConnection]:
    """Run the case's playbook on a stand-in host (facts cache under `folder`: XDG_CACHE_HOME points there)."""
    book = folder / f"{case['name']}.yml"
    book.write_text(case["playbook"] if isinstance(case["playbook"], str) else yaml.safe_dump(case["playbook"]))
    playbook = load_playbook(book)
    os_release = (OS_RELEASE_DIR / f"{case.get('os', 'debian-12')}.txt").read_text()
    host_block = {k: str(v) for k, v in (case.get("host") or {}).items()}
    host = Host(name=f"standin-{case['name']}", address="192.0.2.1", vars=dict(case.get("host_vars") or {}))

    def facts(boot: int) -> str:
        more = case.get("more_facts_after_reboot", case.get("more_facts", "")) if boot > 1 else \
            case.get("more_facts", "")
        return minimal_facts(os_release, host_block, boot, more)

    last = case.get("last_run_facts")
    if last is not None and last is not False:
        facts_cache.save(host, facts(1) if last is True else minimal_facts(os_release, host_block, 1, last))
    cancel = threading.Event()
    if case.get("cancelled"):
        cancel.set()
    conn = StandinConnection(host.name, facts, [Reply(**r) for r in case.get("replies") or []], cancel)
    run = HostRun(host, conn, playbook, dict(case.get("vars") or {}), bool(case.get("check")), NoEvents(), cancel)
    if playbook.rollout.rolling or playbook.gate or "gpunode_scheduler" in host.vars:
        rollout = host_rollouts(playbook, [host])[host.name]
        ticks = itertools.count(0, float(case.get("clock_step", 1)))
        rollout.sleep, rollout.clock = (lambda _seconds: None), (lambda: next(ticks))
        return rollout.run(run), conn
    return run.run(), conn


def ran(outcome: HostOutcome) -> list[str]:
    """The commands the runner sent in sessions of their own, by label: not the lock's exec, not the boot marker,
    not what ran inside the lock's session."""
    return [c["label"] for c in outcome.commands
            if c["new_session"] and not c["label"].startswith("lock + facts") and c["label"] != "boot marker"]


def inside_lock(outcome: HostOutcome) -> list[str]:
    """The scripts run inside the lock's session (probes, a guessed probe), by the runner's label."""
    return [c["label"].removesuffix(", inside the lock's session") for c in outcome.commands if not c["new_session"]]


def mismatches(expect: dict[str, Any], outcome: HostOutcome) -> list[str]:
    """Where the outcome differs from `expect`, each key it names."""
    got = {"status": outcome.status, "steps": {s.name: s.status for s in outcome.steps}, "ran": ran(outcome),
           "inside_lock": inside_lock(outcome), "execs": outcome.exec_count, "failed_step": outcome.failed_step}
    found = []
    for key in ("status", "ran", "inside_lock", "execs", "failed_step"):
        if key in expect and expect[key] != got[key]:
            found.append(f"{key}: expected {expect[key]!r}, got {got[key]!r}")
    for key, value in (expect.get("rollout") or {}).items():
        if key not in outcome.rollout or value not in ("*", outcome.rollout[key]):
            found.append(f"rollout[{key}]: expected {value!r}, got {outcome.rollout.get(key, '(absent)')!r}")
    if "steps" in expect and list((expect["steps"] or {}).items()) != [(s.name, s.status) for s in outcome.steps]:
        found.append(f"steps: expected {expect['steps']!r}, got {got['steps']!r}")
    for part in expect.get("notes") or []:
        if not any(part in note for note in outcome.notes):
            found.append(f"notes: none holds {part!r}: {outcome.notes!r}")
    if "error" in expect and expect["error"] not in (outcome.error or ""):
        found.append(f"error: expected a part {expect['error']!r}, got {outcome.error!r}")
    return found


def shown(outcome: HostOutcome) -> str:
    """The outcome in a case's `expect` shape, for failure messages."""
    return yaml.safe_dump({"status": outcome.status, "steps": {s.name: s.status for s in outcome.steps},
                           "ran": ran(outcome), "inside_lock": inside_lock(outcome), "execs": outcome.exec_count,
                           "notes": outcome.notes,
                           "error": outcome.error, "failed_step": outcome.failed_step, "rollout": outcome.rollout,
                           "messages": {s.name: s.message for s in outcome.steps if s.message}},
                          sort_keys=False, width=120)
