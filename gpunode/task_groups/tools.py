"""The tasks about gpunode itself: steps, playbooks, init, cache, bench."""

from __future__ import annotations

import sys

from invoke.exceptions import Exit

from gpunode.commands.common import cli_errors
from gpunode.errors import UsageError
from gpunode.task_groups.base import _amount, gtask


@gtask(help={"show": "print one step kind's doc and arguments (type, default, what it is)"})
def steps(c, show=None):
    """List the step kinds a playbook can use, or print one kind's reference (as docs/steps.md has it)."""
    from gpunode.steps.reference import step_section, steps_index
    from gpunode.steps.registry import declared

    with cli_errors():
        if not show:
            print(steps_index(), end="")
            return
        if show not in declared():
            raise UsageError(f"no step kind {show!r}",
                             fix="`gpunode steps` lists them: " + ", ".join(sorted(declared())))
        print("\n".join(step_section(show)))


@gtask(help={"json": "print JSON", "show": "print one built-in playbook's YAML (to read it or start your own)"})
def playbooks(c, json=False, show=None):
    """List the built-in playbooks with their tags, variables and defaults (read from the playbooks themselves)."""
    from gpunode.commands.playbooks_cmd import list_playbooks

    with cli_errors():
        print(list_playbooks(json, show), end="")


@gtask(positional=["directory"], help={
    "directory": "the project folder to create (it may exist, but none of the files gpunode writes may)",
    "force": "overwrite files that exist",
})
def init(c, directory, force=False):
    """Start a project of your own: an inventory (hosts, group_vars, host_vars), site.yml, README, tasks.py."""
    from gpunode.commands.init_cmd import init_project

    with cli_errors():
        print(init_project(directory, force), end="")


@gtask(positional=["action"], help={
    "action": "list (every entry with its key, size, builder and whether it is intact) or prune",
    "dir": "the cache folder (default $XDG_CACHE_HOME/gpunode/modules, what provision uses), or the https URL of a "
           "module_cache (its entries read so far, kept on this controller)",
    "kernel": "only entries for this kernel release", "older_than": "prune: entries older than this many days",
    "invalid": "prune: entries whose package or vermagic fails the check", "json": "print JSON",
})
def cache(c, action, dir=None, kernel=None, older_than=None, invalid=False, json=False):  # noqa: A002
    """The module cache: DKMS modules built once per kernel and installed on the other hosts (`module_cache`)."""
    from gpunode.commands.cache_cmd import cache_command

    with cli_errors():
        days = _amount("--older-than", older_than, 0.0) if older_than is not None else None
        print(cache_command(action, dir, kernel, days, invalid, json), end="")


@gtask(help={"hosts": "host counts, comma-separated (default 1,8,32)",
             "repeat": "converged re-runs per tool, median reported (default 3)",
             "tools": "default floor,gpunode,ansible,pyinfra",
             "tools_at": "other tools at a host count, N=TOOLS[;N=TOOLS] (default 32=floor,gpunode,pyinfra: "
                         "ansible at 32 hosts takes too long)",
             "output": "results folder (default bench/results)",
             "no_micro": "skip the facts and verify-gpu parse timings"})
def bench(c, hosts="1,8,32", repeat=3, tools="floor,gpunode,ansible,pyinfra", tools_at="32=floor,gpunode,pyinfra",
          output=None, no_micro=False):
    """Benchmark gpunode against ansible-playbook, pyinfra and the SSH floor on fresh lab hosts (root; a checkout)."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    if not (repo / "bench" / "run.py").is_file():
        raise Exit("bench/ is part of the source checkout, not of an installed gpunode", code=2)
    sys.path.insert(0, str(repo))
    from bench.run import main as run_bench

    argv = ["--hosts", str(hosts), "--repeat", str(repeat), "--tools", tools, "--tools-at", tools_at or ""]
    argv += ["--no-micro"] if no_micro else []
    code = run_bench(argv + (["--output", output] if output else []))
    if code:
        raise Exit(code=code)
