"""docs/steps.md, playbooks.md and tasks.md: read from the step classes, the playbook files and the task table."""

from __future__ import annotations

import inspect
from typing import Any

from gpunode.docgen.where import GENERATED
from gpunode.markdown import cell, code, prose, table, yaml_value
from gpunode.steps.reference import first_line, step_section

# ---- steps ------------------------------------------------------------------------------------------------------





def steps_md() -> str:
    from gpunode.steps.kinds import STEP_TYPES
    from gpunode.steps.registry import declared

    kinds = sorted(declared())
    out = [GENERATED, "", "# Steps", "",
           "Each step of a playbook names one of these kinds with its arguments (`- packages: {names: [jq]}`), "
           "plus the step keys (`name`, `when`, `tags`, `notify`, `register`, ...: [playbook language]"
           "(playbook-language.md)). A kind is the `kind` attribute of its class in `gpunode/steps/`; an argument's "
           "doc is the `arg(default, doc)` of its field. A project's own kinds live in `library/` beside its "
           "playbook: [a step kind in ten minutes](writing-steps.md).", ""]
    out += [f"- [`{k}`](#{k}): {cell(first_line(STEP_TYPES[k].__doc__))}" for k in kinds]
    for kind in kinds:
        out += ["", *step_section(kind)]
    return "\n".join(out) + "\n"








# ---- playbooks --------------------------------------------------------------------------------------------------

def playbooks_md() -> str:
    from gpunode.playbook.builtin import builtin_path
    from gpunode.playbook.catalog import describe_builtins
    from gpunode.playbook.load import load_playbook

    out = [GENERATED, "", "# Built-in playbooks", "",
           "`--playbook NAME` runs one (`gpunode playbooks --show NAME` prints it); `include: NAME` uses one from a "
           "playbook of yours. Variables are defaults: inventory variables override them, `--var`/`-e` override "
           "both. Read from the playbook files themselves (`playbooks/`): the header comment, `vars:` with their "
           "trailing comments, and the variables its steps use without a default.", ""]
    infos = sorted(describe_builtins(), key=lambda i: i.name)
    out += [f"- [`{i.name}`](#{i.name}): {cell(i.description.split('. ')[0])}" for i in infos]
    for info in infos:
        book = load_playbook(builtin_path(info.name))
        out += ["", f"## {info.name}", "", f"`playbooks/{info.name}.yml`", "", prose(info.description), ""]
        if info.tags:
            out += ["Tags: " + ", ".join(f"`{t}`" for t in info.tags), ""]
        if info.variables:
            out += table(["variable", "type", "default", "what it is"],
                         [[f"`{v.name}`", "" if v.required else _var_type(v.default),
                           "**required**" if v.required else code(yaml_value(v.default)), cell(v.comment)]
                          for v in info.variables])
            out.append("")
        out += table(["step", "kind", "tags", "when"],
                     [[cell(s.name or ""), f"[`{s.kind}`](steps.md#{s.kind})" if s.kind else "",
                       cell(", ".join(s.tags)), code(str(s.when)) if s.when is not None else ""]
                      for s in book.steps])
        if book.handlers:
            out += ["", "Handlers: " + ", ".join(f"{cell(name)} (`{spec.kind}`)"
                                                  for name, spec in book.handlers.items())]
    return "\n".join(out) + "\n"


def _var_type(default: Any) -> str:
    """The type `--var` checks a value against (gpunode/playbook/vartypes.py): the default's."""
    if default is None:
        return "any"
    return {bool: "bool", int: "int", float: "number", str: "str", list: "list", dict: "mapping"}.get(
        type(default), type(default).__name__)


# ---- tasks ------------------------------------------------------------------------------------------------------

def tasks_md() -> str:
    from gpunode.tasks import ns

    out = [GENERATED, "", "# Tasks", "",
           "Every task is both `gpunode TASK` (the console script) and `invoke TASK` (from a folder with a "
           "`tasks.py`, such as this repository or one made by `gpunode init`). `gpunode TASK --help` prints the same "
           "as this page. Exit codes: 0 done, 1 a host failed (or is unhealthy), 2 bad input or unreachable.", ""]
    names = sorted(ns.task_names)
    out += [f"- [`{n}`](#{n}): {cell(first_line(ns[n].__doc__))}" for n in names]
    for name in names:
        task = ns[name]
        arguments = task.get_arguments()
        usage = " ".join([f"gpunode {name}", *(f"{a.name.upper()}" for a in arguments if a.positional),
                          *(["[options]"] if any(not a.positional for a in arguments) else [])])
        out += ["", f"## {name}", "", f"`{usage}`", "", prose(inspect.cleandoc(task.__doc__ or "")), ""]
        rows = [[" ".join(code(_flag(n)) for n in a.names), _kind(a), _task_default(a), cell(a.help or "")]
                for a in arguments if not a.positional]
        rows += [[code(a.name.upper()), "positional", "", cell(a.help or "")] for a in arguments if a.positional]
        out += table(["option", "takes", "default", "what it does"], sorted(rows)) if rows else ["No options."]
    return "\n".join(out) + "\n"


def _flag(name: str) -> str:
    return f"-{name}" if len(name) == 1 else f"--{name.replace('_', '-')}"


def _kind(argument: Any) -> str:
    kind = argument.kind
    if kind is bool:
        return "flag"
    if kind is list:
        return "value, repeatable"
    return {int: "number", str: "value"}.get(kind, getattr(kind, "__name__", str(kind)))


def _task_default(argument: Any) -> str:
    default = argument.default
    if default in (None, [], False, ""):
        return ""
    return code(str(default))
