"""Rolling runs (issue 40): `serial` and `max_fail_percentage` as Ansible reads them (ansible/ansible
lib/ansible/executor/playbook_executor.py at 0545525c: `_get_serialized_batches` and the batch loop of `run`;
the list form from docs/docsite/rst/playbook_guide/playbooks_strategies.rst), and a provision that stops after a
failed batch without touching the hosts after it."""

from __future__ import annotations

import json

import pytest

from gpunode.errors import UsageError
from gpunode.playbook import load_playbook
from gpunode.playbook.rollout import Rollout
from tests.conftest import run_cli


@pytest.mark.parametrize(("serial", "hosts", "sizes"), [
    (None, 5, [5]),
    (2, 5, [2, 2, 1]),
    ("2", 4, [2, 2]),
    ("30%", 10, [3, 3, 3, 1]),
    ("10%", 5, [1, 1, 1, 1, 1]),       # a percentage rounds down, but a batch has at least one host
    ([1, "50%"], 6, [1, 3, 2]),        # a canary, then half of all hosts at a time: the last size repeats
    ([1, 2, 10], 4, [1, 2, 1]),
])
def test_batches_as_ansible_cuts_them(serial, hosts, sizes):
    batches = Rollout.parse(serial, None).batches(list(range(hosts)))
    assert [len(b) for b in batches] == sizes
    assert [h for b in batches for h in b] == list(range(hosts))  # in inventory order, each host once


@pytest.mark.parametrize(("max_fail", "failed", "size", "stops"), [
    (None, 1, 2, False), (None, 2, 2, True),   # without the key only a batch that failed whole stops the rollout
    (0, 1, 4, True), (0, 0, 4, False),
    (25, 1, 4, False), (25, 2, 4, True),      # "exceeds": 25% of 4 failing is still allowed
    (100, 4, 4, False),
])
def test_a_batch_stops_the_rollout_when_its_failures_exceed_the_limit(max_fail, failed, size, stops):
    assert Rollout.parse(1, max_fail).stops_after(failed, size) is stops


@pytest.mark.parametrize(("text", "words"), [
    ("serial: 0", "serial: '0' is not a batch size"),
    ("serial: -1", "serial: '-1' is not a batch size"),
    ("serial: [1, many]", "serial: 'many' is not a batch size"),
    ("max_fail_percentage: 150", "max_fail_percentage: 150 is not a percentage"),
    ("max_fail_percentage: ten", "max_fail_percentage: 'ten' is not a percentage"),
    ("canary: -1", "canary: -1 is not a number of hosts"),
    ("canary: yes", "canary: True is not a number of hosts"),
    ("drain: always", "drain: 'always' is not auto or never"),
    ("drain_timeout: 0", "drain_timeout: 0 is not a number of seconds"),
    ("rollback: maybe", "rollback: 'maybe' is not true or false"),
])
def test_a_wrong_rollout_is_refused_at_its_line(tmp_path, text, words):
    """Each rolling key's bad value is refused at its line, with that key's own fix."""
    book = tmp_path / "p.yml"
    book.write_text(f"{text}\nsteps:\n  - command: {{cmd: 'true'}}\n")
    with pytest.raises(UsageError) as error:
        load_playbook(book)
    key = text.partition(":")[0]
    assert words in str(error.value) and error.value.line == 1 and error.value.fix.startswith(key + ":")


@pytest.mark.parametrize(("canary", "serial", "hosts", "sizes"), [
    (1, None, 5, [1, 4]),
    (1, 2, 5, [1, 2, 2]),
    (2, "50%", 6, [2, 3, 1]),   # the percentage is of all the play's hosts, as in Ansible
    (3, 1, 2, [2]),             # fewer hosts than the canary: one batch
])
def test_the_canary_goes_first_and_alone(canary, serial, hosts, sizes):
    rollout = Rollout.from_play({"canary": canary, "serial": serial})
    assert [len(b) for b in rollout.batches(list(range(hosts)))] == sizes


def test_a_failed_canary_host_stops_the_rollout_whatever_the_limit():
    rollout = Rollout.from_play({"canary": 2, "serial": 1, "max_fail_percentage": 60})
    assert rollout.stops_after(1, 2, number=1) is True
    assert rollout.stops_after(1, 2, number=2) is False  # later batches: the limit as written


def test_a_failed_canary_stops_the_rollout_before_the_other_hosts(tmp_path):
    """Three hosts whose SSH port refuses at once: the canary batch (serial 1) fails whole, the other two are not
    contacted and are reported cancelled with the batch that stopped the rollout; exit 1."""
    book = tmp_path / "p.yml"
    book.write_text("serial: [1, 2]\nsteps:\n  - command: {cmd: 'true'}\n")
    inventory = tmp_path / "inv.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {f"n{i}": {"ansible_host": "127.0.0.1", "ansible_port": 1}
                                                      for i in (1, 2, 3)}}}))
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report",
                     str(tmp_path / "r.json"), "--log-dir", str(tmp_path / "logs"))
    assert result.code == 1, result.output
    assert "rollout (serial: 1, 2): batch 1: n1; batch 2: n2, n3" in result.stdout  # said before any host runs
    hosts = {h["host"]: h for h in json.loads((tmp_path / "r.json").read_text())["hosts"]}
    assert hosts["n1"]["status"] == "unreachable"
    for name in ("n2", "n3"):
        assert hosts[name]["status"] == "cancelled", hosts[name]
        assert hosts[name]["error"] == ("not run: the rollout stopped after batch 1 of 2, where 1 of 1 host(s) "
                                        "failed (every host of a batch failed)")
        assert "run again" in hosts[name]["fix"]


def test_a_failed_canary_is_named_as_what_stopped_the_rollout(tmp_path):
    """With max_fail_percentage: 100 the limit alone would never stop the rollout; the canary did, and the cancelled
    hosts say so (they said "more than max_fail_percentage 100%", which 1 of 1 is not)."""
    book = tmp_path / "p.yml"
    book.write_text("canary: 1\nserial: 1\nmax_fail_percentage: 100\nsteps:\n  - command: {cmd: 'true'}\n")
    inventory = tmp_path / "inv.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {f"n{i}": {"ansible_host": "127.0.0.1", "ansible_port": 1}
                                                      for i in (1, 2, 3)}}}))
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report",
                     str(tmp_path / "r.json"), "--log-dir", str(tmp_path / "logs"))
    assert result.code == 1, result.output
    hosts = {h["host"]: h for h in json.loads((tmp_path / "r.json").read_text())["hosts"]}
    assert hosts["n2"]["status"] == "cancelled" and hosts["n2"]["error"] == (
        "not run: the rollout stopped after batch 1 of 3, where 1 of 1 host(s) failed (the canary batch: any failure "
        "there stops the rollout, whatever max_fail_percentage says)")


@pytest.mark.lab
def test_serial_one_changes_one_host_after_the_other(lab, new_host, tmp_path):
    """On lab hosts: with `serial: 1` the second host's change starts after the first host's has ended; a second
    run is converged on both."""
    from tests.conftest import host_inventory

    hosts = [new_host(), new_host()]
    book = tmp_path / "p.yml"
    book.write_text("serial: 1\nsteps:\n  - command: {cmd: 'date +%s.%N > /root/started; sleep 1; "
                    "date +%s.%N > /root/ended', creates: /root/ended}\n")
    inventory = host_inventory(lab, hosts, tmp_path / "inv.yml")
    first = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--log-dir", str(tmp_path / "l"))
    assert first.code == 0, first.output
    times = [{name: float((h.root / "root" / name).read_text()) for name in ("started", "ended")} for h in hosts]
    assert times[1]["started"] >= times[0]["ended"], times
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report",
                    str(tmp_path / "r.json"), "--log-dir", str(tmp_path / "l2"))
    assert again.code == 0 and all(h["changed"] == 0 for h in json.loads((tmp_path / "r.json").read_text())["hosts"])
