"""Checks made before any host is contacted (exit 2, file:line, a fix): the Jinja syntax of every template and
condition (at load), and every templated step argument whose value is known on the controller (`--var`, inventory
and playbook variables; not facts), for each selected host."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gpunode.errors import UsageError
from gpunode.playbook.template import TemplateError, evaluate, has_template, render, resolve_variables
from gpunode.templates_read import names_in_order, names_read, template_strings
from gpunode.values import kind_of

_UNDEFINED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")


def _syntax_error(text: str, expression: bool) -> str | None:
    """Jinja's complaint about a template (or a bare expression, `when:`), None when it parses."""
    import jinja2

    from gpunode.playbook.template import _env

    try:
        if expression:
            _env().compile_expression(text)
        else:
            _env().compile(text)  # compiling (not only parsing) also finds an unknown filter or test
    except jinja2.TemplateSyntaxError as exc:
        return f"{exc.message} (template line {exc.lineno})" if "\n" in text else str(exc.message)
    return None


def check_syntax(value: Any, source: str, line: int, what: str) -> None:
    """Every template in `value` parses; else a UsageError at source:line."""
    for text in template_strings(value):
        problem = _syntax_error(text, expression=False)
        if problem:
            unknown = problem.startswith(("No filter named", "No test named"))
            raise UsageError(f"{'Jinja error' if unknown else 'Jinja syntax error'} in {what} {text!r}: {problem}",
                             source=source, line=line,
                             fix="the filters and tests are Ansible's (docs/playbook-language.md: Filters and tests)"
                             if unknown else "close every `{{` with `}}` and every `{%` with `%}`; quote a string "
                             "that holds them; filters are written `{{ x | name }}`")


def check_conditions(conditions: Iterable[str], source: str, line: int, key: str) -> None:
    """`when:` / `failed_when:` / `changed_when:` are bare Jinja expressions (no `{{ }}`) that must parse."""
    for text in conditions:
        problem = _syntax_error(str(text), expression=True)
        if problem:
            raise UsageError(f"Jinja syntax error in {key}: {text!r}: {problem}", source=source, line=line,
                             fix=f"{key} is a bare expression, e.g. `{key}: result.rc != 0` or "
                             "`when: install_docker | bool`")


def check_arguments(book: Any, hosts: list[Any], extra_vars: dict[str, Any]) -> None:
    """Render each templated step argument with what the controller knows of each host and validate it, so that a
    wrong value (`--var driver_branch=abc` for an integer) is refused before any connection. What needs facts or a
    registered result (or does not render here for any other reason) is left for the host's run."""
    from gpunode.steps.kinds import build_step

    seen: set[tuple[int, str]] = set()
    specs = [*book.steps, *book.handlers.values(), *book.gate]
    registered = {spec.register for spec in specs if spec.register}
    for host in hosts:
        for index, spec in enumerate(specs):
            variables = resolve_variables({**book.vars, **spec.vars, **host.vars, **extra_vars,
                                           "inventory_hostname": host.name, "check_mode": False})
            if index == 0:
                _check_package_cache(host.name, variables)
            if index < len(book.steps):
                _check_when(book, index, host.name, variables)
            if not has_template(spec.args):
                continue
            try:
                if spec.when is not None and not evaluate(str(spec.when), variables):
                    continue
                args = render(spec.args, variables)
            except TemplateError as exc:
                # a variable set nowhere (not the facts, not a registered result) is undefined on the host too: the
                # step would fail there for sure (a handler only if notified: left alone)
                missing = _UNDEFINED.search(str(exc))
                if missing and index < len(book.steps) and missing.group(1) not in {"facts", *registered}:
                    name = missing.group(1)
                    raise UsageError(f"{exc} (for host {host.name}: no playbook var, inventory var or -e sets it)",
                                     source=spec.source, line=spec.line,
                                     fix=f"give {name} a value: -e {name}=..., the inventory (group_vars, host_vars) "
                                     "or the playbook's vars; or `| default(...)` in the template") from None
                continue  # facts, a registered result, a lookup...: known on the host only
            key = (index, repr(args))
            if key in seen:
                continue
            seen.add(key)
            try:
                build_step(spec.kind, args)
            except ValueError as exc:
                raise _refusal(spec, exc, host.name, {**book.vars, **spec.vars}) from None


# variables the runner and verify read themselves (not through a template): never a misspelling of another
_READ_BY_GPUNODE = {"package_cache", "known_hosts", "expect_gpus", "expect_model", "expected_mounts",
                    "verify_container_image"}


def misspelt_variables(book: Any, hosts: list[Any], extra_vars: dict[str, Any]) -> list[str]:
    """Warnings for variables set by -e/--var or the inventory that the playbook never reads but whose name is
    close to one it does (`kernel_polcy` for `kernel_policy`): Ansible ignores them silently, and the playbook's
    default then applies. Only near misses are named; an inventory holds variables of other playbooks too."""
    import difflib

    specs = [*book.steps, *book.handlers.values()]
    read = set(book.vars) | _READ_BY_GPUNODE
    for spec in specs:
        read |= names_read(spec.args, [spec.when, *(spec.failed_when or []), *(spec.changed_when or [])])
        read |= set(spec.vars) | names_read(list(spec.vars.values()))
    read |= names_read(list(book.vars.values()))
    given = {name: "-e/--var" for name in extra_vars}
    for host in hosts:
        for name in host.vars:
            given.setdefault(name, f"the inventory (host {host.name})")
    warnings = []
    for name, where in sorted(given.items()):
        if name in read or name.startswith(("ansible_", "gpunode_")):
            continue
        near = difflib.get_close_matches(name, sorted(n for n in read if len(n) > 3), 1, 0.85)
        if near:
            warnings.append(f"variable {name} (from {where}) is not read by playbook {book.name}; did you mean "
                            f"{near[0]}?")
    return warnings


def _check_package_cache(host: str, variables: dict[str, Any]) -> None:
    """`package_cache` (the package share, read by the runner rather than a step) is off, on or a folder: a list or a
    mapping would become a folder named after its Python text, so it is refused before any host is contacted."""
    value = variables.get("package_cache")
    if isinstance(value, str) and "://" in value:
        raise UsageError(f"package_cache {value} for host {host} is a URL, but the package share is a folder on the "
                         "controller that the run writes (a URL would become a folder named after it)",
                         fix="set package_cache to a folder on the controller (a mounted share works), true (the "
                         "default folder) or off; an https URL is read only by module_cache, which only reads")
    if value is None or isinstance(value, str | bool | int | float):
        return
    hint = getattr(value, "_undefined_hint", None)  # a template that reads a variable set nowhere
    if hint:
        raise UsageError(f"{hint} (for host {host})",
                         fix="give that variable a value (-e, the inventory or the playbook's vars), or set "
                         "package_cache to a folder, true or off")
    raise UsageError(f"package_cache must be off, true or a folder on the controller, got a {kind_of(value)} "
                     f"({value!r}) for host {host}",
                     fix="set package_cache to a folder (package_cache=/var/cache/gpunode/packages), true (the "
                     "default folder) or off, in -e/--var, the inventory or the playbook's vars")


def _check_when(book: Any, index: int, host: str, variables: dict[str, Any]) -> None:
    """A step's `when:` that reads a variable set nowhere (no var, no -e, not facts, registered by no earlier step
    or handler) is undefined on the host too: refused now rather than failing each host after connecting."""
    spec = book.steps[index]
    if spec.when is None:
        return
    try:
        evaluate(str(spec.when), variables)
    except TemplateError as exc:
        missing = _UNDEFINED.search(str(exc))
        known = {"facts"} | {s.register for s in [*book.steps[:index], *book.handlers.values()] if s.register}
        if not missing or missing.group(1) in known:
            return  # facts or a registered result: known on the host only
        name = missing.group(1)
        later = any(s.register == name for s in book.steps[index + 1:])
        why = "only a later step registers it" if later else "no earlier step registers it"
        raise UsageError(f"{exc} (for host {host}: {why}; no playbook var, inventory var or -e sets it)",
                         source=spec.source, line=spec.line,
                         fix=f"register {name} in an earlier step (`register: {name}`), give it a value "
                         f"(-e {name}=..., the inventory or the playbook's vars), or test it first: "
                         f"`when: {name} is defined and ...`") from None


def _refusal(spec: Any, exc: ValueError, host: str, defaults: dict[str, Any]) -> UsageError:
    raw = spec.args.get(getattr(exc, "arg", None) or "")
    names = names_in_order(raw)
    source = f" (the value comes from the variable {', '.join(names)}, as host {host} sees it)" if names else ""
    example = f" (the playbook's default: {names[0]}={defaults[names[0]]})" \
        if names and defaults.get(names[0]) is not None else ""
    fix = (f"give {names[0]} a valid value where it is set (-e/--var, the inventory or the playbook's vars){example}"
           if names else f"see `gpunode steps --show {spec.kind}` (docs/steps.md)")
    return UsageError(f"{exc}{source}", source=spec.source, line=spec.line, fix=fix)
