"""`provision`: run a playbook on hosts, with live progress, a summary, reports and exit codes."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.app.hosts import load_hosts
from gpunode.app.run import diff_size, run_and_report
from gpunode.app.variables import parse_extra_vars, parse_vars
from gpunode.commands.common import check_forks
from gpunode.errors import UsageError
from gpunode.inventory import Host
from gpunode.inventory.connvars import with_extra_vars
from gpunode.playbook import load_playbook, select_steps, split_tags
from gpunode.playbook.vartypes import check_var_types


@dataclass(frozen=True)
class ProvisionRequest:
    """One `provision` as the command line asked for it: built once by the task (gpunode/task_groups/hosts.py) and
    passed down whole. `playbook`: a built-in name or a path. `variables` are `--var K=V`, `extra_vars` Ansible's
    `-e` forms (K=V, @file, JSON/YAML); `-e` wins. `tags`/`skip_tags`: as given (comma-separated or repeated)."""

    inventory: tuple[str, ...] = ()
    hosts: str | None = None
    playbook: str = "base"
    limit: str | None = None
    check: bool = False
    forks: int = 10
    variables: tuple[str, ...] = ()
    json_report: str | None = None
    junit: str | None = None
    accept_new_host_keys: bool = False
    verbose: bool = False
    log_dir: str | None = None
    tags: tuple[str, ...] = ()
    skip_tags: tuple[str, ...] = ()
    extra_vars: tuple[str, ...] = ()
    diff: bool = False
    ask_become_pass: bool = False
    max_diff_size: str | int | None = None


def provision(request: ProvisionRequest) -> int:
    """Returns the exit code: 0 all hosts ok, 1 some host failed."""
    forks = check_forks(request.forks)
    diff_limit = diff_size(request.max_diff_size)
    extra = {**parse_vars(list(request.variables)),
             **(parse_extra_vars(list(request.extra_vars)) if request.extra_vars else {})}
    loaded = load_playbook(request.playbook)
    check_var_types(loaded, extra)
    book = select_steps(loaded, split_tags(list(request.tags)), split_tags(list(request.skip_tags)))
    limit = request.limit
    _, selected = load_hosts(list(request.inventory), request.hosts, limit or book.hosts,
                             "--limit" if limit or not book.hosts else f"hosts: in {request.playbook}")
    selected = [with_extra_vars(h, extra) for h in selected]
    if request.ask_become_pass:
        selected = with_become_password(selected, ask_password())
    return run_and_report(book, selected, request.check, forks, extra, request.json_report, request.junit,
                          request.accept_new_host_keys, request.verbose, request.log_dir, request.diff,
                          max_diff_size=diff_limit)


def ask_password() -> str:
    """Ansible's `--ask-become-pass` (-K): the become password, asked once on the terminal (never echoed)."""
    import getpass

    try:
        return getpass.getpass("BECOME password: ")
    except (EOFError, KeyboardInterrupt):
        raise UsageError("no become password was given", fix="type it at the prompt, or set ansible_become_password "
                         "in the inventory") from None


def with_become_password(hosts: list[Host], password: str) -> list[Host]:
    """Every host with this become password (it reaches sudo only when sudo asks for it)."""
    import dataclasses

    return [dataclasses.replace(h, become_password=password) for h in hosts]
