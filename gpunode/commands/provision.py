"""`provision`: run a playbook on hosts, with live progress, a summary, reports and exit codes."""

from __future__ import annotations

from gpunode.app.hosts import load_hosts
from gpunode.app.run import diff_size, run_and_report
from gpunode.app.variables import parse_extra_vars, parse_vars
from gpunode.commands.common import check_forks
from gpunode.errors import UsageError
from gpunode.inventory import Host
from gpunode.inventory.connvars import with_extra_vars
from gpunode.playbook import load_playbook, select_steps, split_tags
from gpunode.playbook.vartypes import check_var_types


def provision(inventory: list[str], hosts: str | None, playbook: str, limit: str | None, check: bool,
              forks: int, variables: list[str], json_report: str | None, junit: str | None,
              accept_new_host_keys: bool, verbose: bool, log_dir: str | None = None, tags: list[str] | None = None,
              skip_tags: list[str] | None = None, extra_vars: list[str] | None = None, diff: bool = False,
              ask_become_pass: bool = False, max_diff_size: str | int | None = None) -> int:
    """Returns the exit code: 0 all hosts ok, 1 some host failed. `playbook`: a built-in name or a path.
    `variables` are `--var K=V`, `extra_vars` Ansible's `-e` forms (K=V, @file, JSON/YAML); `-e` wins."""
    forks = check_forks(forks)
    diff_limit = diff_size(max_diff_size)
    extra = {**parse_vars(variables), **(parse_extra_vars(extra_vars) if extra_vars else {})}
    loaded = load_playbook(playbook)
    check_var_types(loaded, extra)
    book = select_steps(loaded, split_tags(tags), split_tags(skip_tags))
    _, selected = load_hosts(inventory, hosts, limit or book.hosts,
                             "--limit" if limit or not book.hosts else f"hosts: in {playbook}")
    selected = [with_extra_vars(h, extra) for h in selected]
    if ask_become_pass:
        selected = with_become_password(selected, ask_password())
    return run_and_report(book, selected, check, forks, extra, json_report, junit,
                          accept_new_host_keys, verbose, log_dir, diff, max_diff_size=diff_limit)


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
