"""Shared by the command-line tasks: turning errors into exit codes, flags every command checks alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from invoke.exceptions import Exit

from gpunode.app.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from gpunode.errors import GpunodeError, UsageError

# Every command's task imports this module: it stays light (no rich, no inventory code until they are used).
__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "HOST_ARGUMENT", "check_forks", "cli_errors"]


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


def check_forks(forks: object) -> int:
    """--forks/-f: a whole number of hosts in parallel, at least 1."""
    text = str(forks).strip()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--forks {forks!r} is not a number of hosts in parallel", source="--forks",
                         fix="give 1 or more, e.g. -f 10")
    return int(text)


def option_pairs(items: list[str] | None, option: str, shape: str, example: str) -> dict[str, str]:
    """`--option KEY=VALUE` given several times, as a mapping; an item without `=` or a key is bad input (exit 2)."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} {item!r} is not {shape}", fix=f"e.g. {option} {example}")
        pairs[key] = value
    return pairs
