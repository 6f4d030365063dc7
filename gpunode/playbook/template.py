"""Jinja2 variables in playbooks: `{{ var }}` strings, native values for whole-expression strings."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode.errors import GpunodeError
from gpunode.templates_read import JINJA_SYNTAX, is_template, template_strings
from gpunode.values import bool_filter, misspelt_bool, truthy

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment


@cache
def _env() -> SandboxedEnvironment:
    """The sandboxed Jinja2 environment, made at the first template or `when:`: a playbook of plain values (and
    every command that renders nothing) never imports jinja2."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    from gpunode.playbook.filters import FILTERS, to_json
    from gpunode.playbook.jinja_tests import TESTS

    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, **JINJA_SYNTAX)  # templates_read parses the same
    env.filters.update(FILTERS)  # Ansible's filters, with Ansible's semantics (playbook/filters.py)
    env.tests.update(TESTS)      # `is version(...)`, `is failed`, `is changed` ...
    env.filters["bool"] = bool_filter  # Ansible's `| bool`: "false", "no", "off", "0" are false
    env.globals["lookup"] = _lookup
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": _json_default}  # `| tojson` of facts
    env.filters["to_json"] = lambda value, **kw: to_json(value, default=_json_default, **kw)  # Ansible's names
    env.filters["to_nice_json"] = lambda value, indent=4, sort_keys=True, **kw: to_json(
        value, default=_json_default, indent=indent, sort_keys=sort_keys, separators=(",", ": "), **kw)
    return env


@functools.lru_cache(maxsize=4096)
def _template(text: str) -> Any:
    """A compiled template (Jinja compiles `from_string` anew each time: the same step on 32 hosts, once)."""
    return _env().from_string(text)


@functools.lru_cache(maxsize=4096)
def _expression(text: str) -> Any:
    """A compiled bare expression (`when:`, "{{ expr }}" alone), undefined names left to fail where read."""
    return _env().compile_expression(text, undefined_to_none=False)


def _json_default(value: Any) -> Any:
    """JSON for what templates see besides plain values: facts and their parts, sets."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _lookup(kind: str, name: str) -> str:
    """Ansible's `lookup('env', NAME)` and `lookup('file', PATH)`: secrets kept out of the inventory."""
    import jinja2

    if kind == "env":
        return os.environ.get(str(name), "")
    if kind == "file":
        try:
            return Path(str(name)).expanduser().read_text().rstrip("\n")  # Ansible strips the final newline
        except OSError as exc:
            raise jinja2.TemplateError(f"lookup('file', {name!r}): {exc.strerror or exc}") from None
    raise jinja2.TemplateError(f"lookup({kind!r}, ...): only 'env' and 'file' lookups exist")


# "{{ expr }}" and nothing else keeps the expression's type; any text around it (even "\n") makes a string.
_WHOLE = re.compile(r"\A\{\{(?P<expr>.*?)\}\}\Z", re.DOTALL)
MAX_DEPTH = 10  # variables that refer to variables: how many levels are expanded


class TemplateError(ValueError):
    """A template could not be rendered (undefined variable, syntax error)."""


def has_template(value: Any) -> bool:
    """Whether any string in `value` (nested too) holds a template."""
    return is_template(value) if isinstance(value, str) else next(template_strings(value), None) is not None


def render(value: Any, variables: dict[str, Any]) -> Any:
    """Render strings inside value; "{{ expr }}" alone keeps the expression's type (a list stays a list)."""
    if isinstance(value, str):
        if not has_template(value):
            return value
        import jinja2

        try:
            whole = _WHOLE.match(value)
            if whole and "{{" not in whole.group("expr"):
                result = _expression(whole.group("expr"))(**variables)
                if isinstance(result, jinja2.Undefined):
                    result._fail_with_undefined_error()
                return result
            return _template(value).render(**variables)
        except jinja2.TemplateError as exc:
            raise TemplateError(f"cannot render {value!r}: {_plain(exc.message or str(exc))}") from None
        except GpunodeError:
            raise  # e.g. the lock's session lost while a facts section was being gathered
        except Exception as exc:  # noqa: BLE001 - a filter's own error (`1.0e+400`, tojson of a set): the template's
            raise TemplateError(f"cannot render {value!r}: {_why(exc)}") from None
    if isinstance(value, dict):
        return {k: render(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, variables) for v in value]
    return value


def resolve_variables(variables: dict[str, Any]) -> dict[str, Any]:
    """Variables whose values refer to other variables (`derived: "d-{{ inventory_hostname }}"`, an include's
    `greet: "{{ motd_text }}"`, a `--var`) expanded, as Ansible does. A variable that cannot be expanded (an undefined
    name, a loop) becomes undefined with the reason, so it fails where it is used and nowhere else."""
    resolved = dict(variables)
    pending = {k for k, v in resolved.items() if has_template(v)}
    if not pending:
        return resolved
    import jinja2

    for _ in range(MAX_DEPTH):
        changed = False
        for key in sorted(pending):
            try:
                value = render(resolved[key], resolved)
            except TemplateError as exc:
                resolved[key] = jinja2.StrictUndefined(hint=f"variable {key!r} cannot be expanded: {exc}")
                pending.discard(key)
                continue
            if value != resolved[key]:
                resolved[key], changed = value, True
            if not has_template(value):
                pending.discard(key)
        if not changed or not pending:
            break
    for key in pending:  # still templated after MAX_DEPTH passes: it refers to itself
        resolved[key] = jinja2.StrictUndefined(hint=f"variable {key!r} refers to itself")
    return resolved


def evaluate(expression: str, variables: dict[str, Any]) -> bool:
    """A `when:` condition (a bare Jinja expression) evaluated to a boolean."""
    import jinja2

    try:
        result = _expression(expression)(**variables)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"cannot evaluate when: {expression!r}: {_plain(exc.message or str(exc))}") from None
    except GpunodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a filter's own error is the condition's
        raise TemplateError(f"cannot evaluate when: {expression!r}: {_why(exc)}") from None
    if isinstance(result, jinja2.Undefined):
        raise TemplateError(f"when: {expression!r} is undefined")  # e.g. a misspelt variable
    if isinstance(result, str) and misspelt_bool(result):  # other text keeps Python's truthiness ("gpu-1": true)
        raise TemplateError(f"when: {expression!r} gave {result!r}, which looks like a misspelt true or false and "
                            "would count as true: write true or false (yes/no, 1/0)")
    return truthy(result)  # Ansible's truthiness: an INI "false" is false


_INTERNAL = re.compile(r"'gpunode\.([\w.]+)\.(\w+) object'")


def _plain(message: str) -> str:
    """Jinja's message without gpunode's internal type names: `'gpunode.facts.model.Facts object' has no attribute
    'x'` reads `facts has no attribute 'x' (...)`: `gpunode facts HOST` lists what there is."""
    def name(match: re.Match[str]) -> str:
        if match.group(2) == "Facts":
            return "facts"
        return "this part of facts" if match.group(1).startswith("facts") else "this value"

    plain = _INTERNAL.sub(name, message)
    return plain + " (`gpunode facts HOST` lists the facts)" if plain != message and "facts" in plain else plain


def _why(exc: Exception) -> str:
    """A filter's error as the user should read it: a filter's own message (`mandatory`) without a type name."""
    from gpunode.playbook.filters import FilterError

    return str(exc) if isinstance(exc, FilterError) else f"{type(exc).__name__}: {exc}"
