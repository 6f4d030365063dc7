"""The tasks behind both `invoke` (tasks.py at the repo top) and the `gpunode` console script: the collection `ns` of
the task groups (gpunode/task_groups/), and the console script's command-line handling."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from invoke import Collection, Program
from invoke.exceptions import Exit, ParseError
from invoke.parser import Parser, ParserContext

from gpunode.cliflags import flag_words, whole_numbers
from gpunode.clihelp import help_argv
from gpunode.errors import UsageError
from gpunode.task_groups.accept import accept
from gpunode.task_groups.base import GTask, gtask
from gpunode.task_groups.hosts import collect, diagnose, facts, inventory_, mount_nfs, provision, verify_gpu
from gpunode.task_groups.image import bake, build_ami, build_image, image_provision, plan, user_data
from gpunode.task_groups.kube import gpu_pod, k8s_drain, k8s_manifest, nfs_volume, runtime_class
from gpunode.task_groups.lab import lab_base_image, lab_down, lab_up
from gpunode.task_groups.tools import bench, cache, init, playbooks, steps

__all__ = ["GTask", "console_main", "gtask", "main", "ns"]

ns = Collection(provision, facts, inventory_, lab_up, lab_down, verify_gpu, diagnose, collect, playbooks, steps, init,
                plan)
ns.add_task(mount_nfs)
ns.add_task(nfs_volume)
ns.add_task(runtime_class)
ns.add_task(gpu_pod)
ns.add_task(k8s_manifest)
ns.add_task(k8s_drain)
ns.add_task(lab_base_image)
ns.add_task(cache)
ns.add_task(build_ami)
ns.add_task(build_image)
ns.add_task(bake)
ns.add_task(image_provision)
ns.add_task(user_data)
ns.add_task(accept)
ns.add_task(bench)
GTask.namespace = ns  # `invoke verify-gpu --help` prints the task's help from it


def main() -> None:
    """Entry point of the `gpunode` console script: the same tasks as `invoke`."""
    from gpunode import __version__

    try:
        argv = help_argv(sys.argv, ns)
        if len(argv) > 2 and argv[1] in ns.task_names:
            argv = argv[:2] + whole_numbers(flag_words(argv[2:], ns[argv[1]]), ns[argv[1]])
        missing_values(argv)
        _Program(namespace=ns, version=__version__, name="gpunode", binary="gpunode").run(diagnose_argv(argv))
        sys.stdout.flush()
    except UsageError as exc:  # found in the command line itself, before Invoke parses it
        print(f"error: {exc.cause}\n  fix: {exc.fix}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # `gpunode inventory | head`: the reader has gone; stop quietly like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
    except Exception as exc:  # noqa: BLE001 - a bug must still end with a message and an exit code, not a traceback
        print(f"error: internal error: {type(exc).__name__}: {exc}\n  fix: please report this (with the command "
              "line); run with GPUNODE_TRACEBACK=1 for the traceback", file=sys.stderr)
        if os.environ.get("GPUNODE_TRACEBACK") == "1":
            raise
        sys.exit(1)


def console_main() -> None:
    """The console script (`gpunode`, `python -m gpunode`): `main()`, then, after a `provision`, exit without the
    interpreter's teardown (every module and object freed one by one: tens of ms after a run). Everything the run
    wrote (reports, logs, the facts cache) is closed by then, and its threads have ended."""
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    if len(sys.argv) < 2 or sys.argv[1] != "provision" or not isinstance(code, int | None):
        sys.exit(code)
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def missing_values(argv: list[str]) -> None:
    """Refuse an option that takes a value but was given none (`provision --var`, `--tags` last on the line): Invoke
    would drop it silently, and a run meant to be narrowed (--tags, --check-like --var) would run everything."""
    if len(argv) < 2 or argv[1] not in ns.task_names:
        return
    takes_value, flags = {}, {"-h", "--help"}
    for argument in ns[argv[1]].get_arguments():
        for name in argument.names:
            flag = f"--{name.replace('_', '-')}" if len(name) > 1 else f"-{name}"
            flags.add(flag)
            if argument.kind is not bool:
                takes_value[flag] = f"--{argument.names[0].replace('_', '-')}"
    for index, token in enumerate(argv[2:], start=2):
        if token in takes_value:
            following = argv[index + 1] if index + 1 < len(argv) else None
            if following is None or following.partition("=")[0] in flags:  # "-1" or "-gpu=x" are values
                print(f"error: {takes_value[token]} needs a value\n  fix: e.g. {takes_value[token]} VALUE; see "
                      f"`gpunode --help {argv[1]}`", file=sys.stderr)
                sys.exit(2)


def diagnose_argv(argv: list[str]) -> list[str]:
    """`gpunode diagnose A B --json` -> `gpunode diagnose --file A --file B --json` (invoke has no variadic
    positional arguments); other commands are passed through unchanged."""
    if len(argv) < 2 or argv[1] != "diagnose":
        return argv
    out, expects_value = argv[:2], False
    for arg in argv[2:]:
        if expects_value or arg.startswith("-"):
            out.append(arg)
            expects_value = arg in ("-f", "--file", "--expect-gpus", "--expect-model", "-e")
        else:
            out += ["--file", arg]
    return out


class _Program(Program):
    """Invoke's program, with bad options (unknown flags, `--forks=abc`) as usage errors: exit 2, no traceback."""

    def parse_core(self, argv) -> None:  # type: ignore[no-untyped-def]
        with _usage():
            super().parse_core(argv)

    def parse_tasks(self) -> None:
        with _usage():
            super().parse_tasks()

    def update_config(self, merge: bool = True) -> None:
        with _usage():  # -f/--config FILE of the wrong type
            super().update_config(merge)

    def _make_parser(self) -> Parser:
        """A parser that knows only the task named first (gpunode runs one task per command line): Invoke deep-copies
        every task's parser context it is given, ~15 ms of start-up for all of gpunode's tasks."""
        name = self.core.unparsed[0] if self.core and self.core.unparsed else ""
        if name not in self.collection.task_names:
            return super()._make_parser()
        args = self.collection[name].get_arguments(ignore_unknown_help=self.config.tasks.ignore_unknown_help)
        context = ParserContext(name=name, aliases=self.collection.task_names[name], args=args)
        return Parser(initial=self.initial_context, contexts=[context])


@contextmanager
def _usage() -> Iterator[None]:
    from invoke.exceptions import UnknownFileType

    try:
        yield
    except UnknownFileType as exc:  # `-f x` on a task without --forks is Invoke's own -f/--config FILE
        raise Exit(message=f"error: -f/--config: {exc}\n  fix: this task has no -f/--forks; -f here is Invoke's "
                   "config file (.yaml, .yml, .json or .py)", code=2) from None
    except (ParseError, ValueError) as exc:
        raise Exit(message=f"error: {_option_problem(exc)}\n  fix: {_option_fix(exc)}", code=2) from None


def _option_fix(exc: Exception) -> str:
    """What to do: for a missing positional argument the task's own command line, else where the options are."""
    import re

    missing = re.search(r"'([\w-]+)' did not receive required positional arguments: (.*)", str(exc))
    if missing:
        task, names = missing.group(1), re.findall(r"'(\w+)'", missing.group(2))
        return (f"give it: `gpunode {task} {' '.join(n.upper() for n in names)} [options]` "
                f"(`gpunode {task} --help` says what it takes)")
    twice = _repeated_option(exc)
    if twice:
        return f"give {twice} once (it takes one value; repeatable options say so in `gpunode --help TASK`)"
    return "see `gpunode --help` and `gpunode --help TASK` for the options and their types"


def _repeated_option(exc: Exception) -> str | None:
    """Invoke's "No idea what 'X' is!" when X is the value of an option given a second time: that option."""
    import re
    import sys

    left = re.search(r"No idea what '(.*)' is!", str(exc))
    argv = sys.argv[1:]
    for i, word in enumerate(argv[1:], start=1):
        before = argv[i - 1]
        if left and word == left.group(1) and before.startswith("--") and "=" not in before and before in argv[:i - 1]:
            return before
    return None


def _option_problem(exc: Exception) -> str:
    """Invoke's parse error in words: `int()` of a bad number (`-f x`) becomes "'x' is not a whole number"."""
    import re

    number = re.search(r"invalid literal for int\(\) with base 10: ('.*')", str(exc))
    if number:
        return f"bad option value: {number.group(1)} is not a whole number (an option that takes a number)"
    twice = _repeated_option(exc)
    if twice:
        return f"{twice} is given twice: the second value is left over ({exc})"
    return f"bad option value: {exc}" if isinstance(exc, ValueError) else str(exc)
