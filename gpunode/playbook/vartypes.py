"""Extra variables (`--var`, `-e`) checked against the types of the playbook's declared defaults, before any host is
contacted: a variable declared `true`/`false` takes only true/false words (`maybe`, `flase` are refused), one
declared as a number only numbers. The error names the file and line of the declaration."""

from __future__ import annotations

from typing import Any

from gpunode.errors import UsageError
from gpunode.playbook.load import Playbook
from gpunode.values import as_bool


def check_var_types(book: Playbook, extra: dict[str, Any], flag: str = "--var/-e") -> None:
    """Raise UsageError (exit 2) for the first extra variable whose value does not fit its declared default."""
    if not extra:
        return
    defaults = declared_defaults(book)
    for name, value in extra.items():
        if name not in defaults:
            continue
        problem, fix = _mismatch(name, defaults[name], value, flag)
        if problem:
            source, line = declared_at(book, name)
            raise UsageError(f"{problem} (declared here with the default {_yaml(defaults[name])})", source=source,
                             line=line, fix=fix)


def declared_defaults(book: Playbook) -> dict[str, Any]:
    """Each variable's default: the play's own `vars:` first, then the included playbooks' (steps' scoped vars)."""
    found: dict[str, Any] = {}
    for spec in [*book.steps, *book.handlers.values()]:
        for name, value in spec.vars.items():
            found.setdefault(name, value)
    return {**found, **book.vars}


def declared_at(book: Playbook, name: str) -> tuple[str, int | None]:
    """The file and line where `name` is declared (a `vars:` key, or an include's `vars:`)."""
    from gpunode.yamlfile import LineDict, load_yaml_file

    sources = dict.fromkeys([book.path, *(s.source for s in [*book.steps, *book.handlers.values()])])
    for source in sources:
        data = load_yaml_file(source)
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, LineDict):
            continue
        for variables in [data.get("vars"), *(i.get("vars") for i in data.get("steps") or []
                                               if isinstance(i, dict) and "include" in i)]:
            if isinstance(variables, LineDict) and name in variables:
                return source, variables.line_of(name)
    return book.path, None


def _mismatch(name: str, default: Any, value: Any, flag: str) -> tuple[str, str]:
    """(problem, fix) when value does not fit the type of default; ("", "") when it does."""
    if isinstance(default, bool):
        if as_bool(value) is None or value == "":
            return (f"{flag} {name}={_yaml(value)} is not true or false",
                    f"give {name}=true or {name}=false (also yes/no, on/off, 1/0)")
    elif isinstance(default, int | float) and not _number(value):
        return f"{flag} {name}={_yaml(value)} is not a number", f"e.g. {name}={default}"
    return "", ""


def _number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)
