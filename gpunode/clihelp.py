"""One task's `--help`, the same whichever way it is asked for: `gpunode --help TASK`, `gpunode TASK --help`,
`invoke TASK --help` (also when Invoke would take `--help` for the task's positional host)."""

from __future__ import annotations

import os
import sys

from invoke import Collection, Program
from invoke.parser import Parser, ParserContext
from invoke.tasks import Task

HELP_FLAGS = ("--help", "-h")


def binary_name() -> str:
    """How the running program calls itself in help: `gpunode`, or Invoke's `inv[oke]`."""
    path = sys.argv[0] or ""
    invoked = os.path.basename(path).startswith("inv") or f"{os.sep}invoke{os.sep}" in path  # or python -m invoke
    return "inv[oke]" if invoked else "gpunode"


def task_name(collection: Collection, task: Task) -> str:
    """The name a task has on the command line (`verify-gpu`, `inventory`)."""
    return next((name for name in collection.task_names if collection[name].body is task.body), task.name)


def help_argv(argv: list[str], collection: Collection) -> list[str]:
    """`gpunode TASK ... --help` -> `gpunode --help TASK`: Invoke would take `--help` for a missing positional
    host or run the task's own checks (`mount-nfs` needs --server) before any help."""
    if len(argv) > 2 and argv[1] in collection.task_names and any(a in HELP_FLAGS for a in argv[2:]):
        return [argv[0], "--help", argv[1]]
    return argv


def print_task_help(collection: Collection, task: Task, binary: str) -> None:
    """Invoke's task help (usage, docstring, every option with its text) for one task."""
    name = task_name(collection, task)
    program = Program(namespace=collection, binary=binary, name="gpunode")
    program.collection = collection
    context = ParserContext(name=name, aliases=collection.task_names[name], args=task.get_arguments())
    program.parser = Parser(contexts=[context])
    program.print_task_help(name)
