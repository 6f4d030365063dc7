"""Flags given a word (`--container-test false`, `--check no`): Invoke would take the word for the next positional
argument (a host named "false") or refuse it as unknown. Here a tri-state flag reads the word; any other flag is
refused with the fix, before anything runs."""

from __future__ import annotations

import re

from invoke.tasks import Task

from gpunode.errors import UsageError

WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
TRI_STATE = {"--container-test": "--no-container-test"}  # flag -> its "off" flag; neither given: decided per host


def flag_words(argv: list[str], task: Task) -> list[str]:
    """argv with `--container-test false` as `--no-container-test`; a word after any other flag is a UsageError."""
    flags = _bool_flags(task)
    out: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        name, eq, inline = token.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else ""
        word = inline if eq else following
        if name in flags and word.lower() in WORDS and (eq or not following.startswith("-")):
            out.append(_read(name, word, flags[name]))
            index += 1 if eq else 2
            continue
        out.append(token)
        index += 1
    return out


def _read(flag: str, word: str, long_name: str) -> str:
    on = WORDS[word.lower()]
    if long_name in TRI_STATE:
        return long_name if on else TRI_STATE[long_name]
    raise UsageError(f"{flag} is a flag and takes no value (got {word!r})",
                     fix=f"give {long_name} to turn it on; leave it out for off" if on else
                     f"leave {long_name} out (off is the default)")


def _bool_flags(task: Task) -> dict[str, str]:
    """Every spelling of the task's flags (`-C`, `--check`) -> its long name."""
    found: dict[str, str] = {}
    for argument in task.get_arguments():
        if argument.kind is not bool:
            continue
        long_name = f"--{argument.names[0].replace('_', '-')}"
        for name in argument.names:
            found[f"--{name.replace('_', '-')}" if len(name) > 1 else f"-{name}"] = long_name
    return found


def whole_numbers(argv: list[str], task: Task) -> list[str]:
    """argv unchanged; a number option given a word (`-f x`, `--forks=ten`) is a UsageError naming the option
    (Invoke said "invalid literal for int() with base 10")."""
    options = {}
    for argument in task.get_arguments():
        if argument.kind is int:
            long_name = f"--{argument.names[0].replace('_', '-')}"
            for name in argument.names:
                options[f"--{name.replace('_', '-')}" if len(name) > 1 else f"-{name}"] = (long_name, argument.default)
    for index, token in enumerate(argv):
        name, eq, inline = token.partition("=")
        if name not in options:
            continue
        value = inline if eq else argv[index + 1] if index + 1 < len(argv) else ""
        if value and not value.startswith("--") and not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            long_name, default = options[name]
            raise UsageError(f"{long_name} {value!r} is not a whole number", fix=f"e.g. {long_name} {default}")
    return argv
