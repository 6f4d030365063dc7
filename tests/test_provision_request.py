"""`provision` (issue 41): the command line becomes one frozen ProvisionRequest, built once by the task and handed
to gpunode.commands.provision.provision whole (no 18 positional arguments to keep in order)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from gpunode import tasks
from gpunode.commands.provision import ProvisionRequest


def request_of(monkeypatch, *argv: str) -> ProvisionRequest:
    """The request `gpunode provision ARGV...` hands to the command (nothing is contacted)."""
    import gpunode.commands.provision as provision_cmd

    seen: list[ProvisionRequest] = []
    monkeypatch.setattr(provision_cmd, "provision", lambda request: seen.append(request) or 0)
    monkeypatch.setattr(sys, "argv", ["gpunode", "provision", *argv])
    tasks.main()
    (request,) = seen
    return request


def test_no_options_give_the_default_request(monkeypatch):
    assert request_of(monkeypatch) == ProvisionRequest()


def test_every_option_reaches_the_request(monkeypatch):
    request = request_of(
        monkeypatch, "-i", "a.yml", "-i", "b.ini", "-H", "u@192.0.2.1:2222", "--playbook", "nfs", "-l", "gpu",
        "-C", "-f", "3", "--var", "x=1", "--var", "y=2", "--json-report", "r.json", "--junit", "j.xml",
        "--accept-new-host-keys", "-v", "--log-dir", "logs", "--tags", "a,b", "--tags", "c", "--skip-tags", "d",
        "-e", "z=3", "--diff", "-K", "--max-diff-size", "10K")
    assert request == ProvisionRequest(
        inventory=("a.yml", "b.ini"), hosts="u@192.0.2.1:2222", playbook="nfs", limit="gpu", check=True, forks=3,
        variables=("x=1", "y=2"), json_report="r.json", junit="j.xml", accept_new_host_keys=True, verbose=True,
        log_dir="logs", tags=("a,b", "c"), skip_tags=("d",), extra_vars=("z=3",), diff=True, ask_become_pass=True,
        max_diff_size="10K")


def test_the_request_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ProvisionRequest().check = True  # type: ignore[misc]
