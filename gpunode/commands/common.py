"""Shared by the command-line tasks: choosing hosts, turning errors into exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from invoke.exceptions import Exit

from gpunode.errors import GpunodeError, UsageError

if TYPE_CHECKING:
    from gpunode.inventory import Host, Inventory

# Every command's task imports this module: it stays light (no rich, no inventory code until they are used).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@contextmanager
def cli_errors() -> Iterator[None]:
    """Usage errors exit 2, other gpunode errors exit 1, each printed with its fix (never a traceback)."""
    try:
        yield
    except UsageError as exc:
        _print_error(exc)
        raise Exit(code=EXIT_USAGE) from None
    except GpunodeError as exc:
        _print_error(exc)
        raise Exit(code=EXIT_FAILED) from None


def _print_error(exc: GpunodeError) -> None:
    from gpunode.report.console import make_console
    from gpunode.report.text import line

    err_console = make_console(stderr=True)
    err_console.print(line(("error:", "bold red"), " ", exc.cause if not exc.host else str(exc)))
    if exc.fix and not exc.host:
        err_console.print(line("  ", ("fix:", "bold"), " ", exc.fix))


HOST_ARGUMENT = "HOST (the positional argument)"  # what facts/verify-gpu/collect name a pattern given there


def load_hosts(inventory: list[str] | None, hosts: str | None, limit: str | None,
               limit_source: str = "--limit") -> tuple[Inventory, list[Host]]:
    """Hosts from `-i` inventories and/or ad-hoc `-H a,b`, narrowed by `--limit` (or a playbook's `hosts:`)."""
    from gpunode.inventory import adhoc_inventory, load_inventory

    if not inventory and not hosts:
        raise UsageError("no hosts: give an inventory (-i FILE) or hosts (-H host1,host2)",
                         fix="e.g. gpunode provision -i inventory/aws-gpu.yml, or -H ubuntu@10.0.1.5")
    base = load_inventory(inventory) if inventory else None
    inv = adhoc_inventory(hosts, base) if hosts else base
    assert inv is not None
    selected = _select(inv, limit, limit_source)
    if not selected and limit and inv.hosts:
        raise UsageError("no hosts selected", source=limit_source, fix=f"check {limit_source} and the inventory")
    if not selected:
        empty = [g for g in inv.groups if g not in ("all", "ungrouped") and not inv.group_hosts(g)]
        listed = f"; groups without hosts: {', '.join(empty)}" if empty else ""
        raise UsageError(f"the inventory has no hosts{listed}",
                         source=", ".join(inventory or []) or "-H",
                         fix="add hosts under a group; a [group:children] entry must name a group defined with its "
                         "own [name] section (or children:/hosts: in YAML)")
    return inv, selected


def _select(inv: Inventory, limit: str | None, limit_source: str) -> list[Host]:
    """inv.select(limit); a pattern that matches nothing names where it was given (--limit, HOST, hosts:)."""
    try:
        return inv.select(limit)
    except UsageError as exc:
        if exc.source != "--limit" or limit_source == "--limit":
            raise
        cause = exc.cause.removeprefix(f"{exc.source}: ")
        raise UsageError(cause, source=limit_source, fix=exc.fix) from exc


def check_forks(forks: object) -> int:
    """--forks/-f: a whole number of hosts in parallel, at least 1."""
    text = str(forks).strip()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--forks {forks!r} is not a number of hosts in parallel", source="--forks",
                         fix="give 1 or more, e.g. -f 10")
    return int(text)


def parse_vars(pairs: list[str]) -> dict[str, Any]:
    """`--var k=v` pairs; values parsed as YAML scalars (true, 3, [a, b])."""
    import yaml

    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--var {pair!r} is not KEY=VALUE", source="--var", fix="e.g. --var driver_branch=580")
        try:
            result[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            result[key] = value
    return result


def is_tty() -> bool:
    return sys.stderr.isatty()
