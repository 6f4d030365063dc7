"""Fuzzed file names and contents written to a real lab host come back byte-exact, and a re-run sees them.

Guards: quoting of paths in probes and in scripts/atomic_write.sh's arguments (gpunode/steps/remote_file.py),
content sent as stdin bytes (never through a shell), and the base64 probe that reads it back.
"""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpunode.connection import ConnectOptions
from gpunode.inventory import load_inventory
from gpunode.playbook import Playbook
from gpunode.playbook.load import StepSpec
from gpunode.runner.run import RunOptions, run_playbook
from tests.conftest import host_inventory
from tests.faults.helpers import INJECTIONS, MARKER

pytestmark = pytest.mark.lab

TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
names = st.lists(st.one_of(st.text(TEXT, min_size=1, max_size=8), st.sampled_from(INJECTIONS)), min_size=1,
                 max_size=4).map("".join).map(lambda v: v.replace("/", "_")).filter(
    lambda v: v not in (".", "..") and len(v.encode()) < 200)
contents = st.text(st.characters(blacklist_categories=("Cs",)), max_size=2000)
BOOK = Playbook("fuzz", "fuzz", None, {}, [
    StepSpec("file", {"path": "/root/fuzz/{{ fuzz_name }}", "content": "{{ fuzz_content }}"}, "write", None, [],
             "fuzz", 1)])


@pytest.fixture(scope="module")
def target(lab, tmp_path_factory):
    lab_host = list(lab.hosts.values())[0]
    inventory = host_inventory(lab, [lab_host], tmp_path_factory.mktemp("fuzz") / "inv.yml")
    yield lab_host, list(load_inventory(str(inventory)).hosts.values())
    shutil.rmtree(lab_host.root / "root/fuzz", ignore_errors=True)


def _run(hosts, name: str, content: str):
    options = RunOptions(extra_vars={"fuzz_name": name, "fuzz_content": content}, connect=ConnectOptions())
    (outcome,) = run_playbook(BOOK, hosts, options).hosts
    return outcome


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, content=contents)
def test_fuzzed_names_and_contents_round_trip_on_a_lab_host(target, name, content):
    lab_host, hosts = target
    first = _run(hosts, name, content)
    assert first.status in ("changed", "ok"), (first.error, first.fix)
    assert (lab_host.root / "root/fuzz" / name).read_bytes() == content.encode()
    again = _run(hosts, name, content)
    assert again.status == "ok" and again.changed == 0, again.steps  # the probe read back the same bytes
    for home in ("root", "home/gpunode"):
        assert not (lab_host.root / home / MARKER).exists()
