"""What playbook templates read: the one answer to "which variables (and which of their attributes) does this value
read", from Jinja's own AST, for every place that asks (facts sections, deferred steps, variable names in messages,
the playbook catalogue); and the one walker of the strings nested in a value.

Templates are parsed only, never rendered or compiled for running: an unknown filter or test (Ansible's, or a
misspelt one) does not stop the analysis; the syntax check at load (playbook/validate.py) reports those. A template
that does not parse (load refuses those too, so only a value built around the loader gets here) is answered
conservatively: it reads every name it mentions, each one whole (a superset of what it could read).

At the core layer so that the facts (parsers layer) can ask too; jinja2 is imported at the first analysis only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment
    from jinja2.nodes import Template

# The template syntax of playbooks: playbook/template.py makes its (sandboxed, rendering) environment with these,
# the analysis here its (parse-only) one, so both read a template the same way (default delimiters).
JINJA_SYNTAX: dict[str, Any] = {"keep_trailing_newline": True}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # only for a template that does not parse (see the module docstring)


def is_template(text: str) -> bool:
    """Whether a string holds a template (`{{ }}` or `{% %}`); anything else is plain text, read by nobody."""
    return "{{" in text or "{%" in text


def template_strings(value: Any, templated_only: bool = True) -> Iterator[str]:
    """The strings nested in `value` (itself, or inside dicts' values, lists and tuples, at any depth): those that
    hold a template, or every one with `templated_only=False`."""
    if isinstance(value, str):
        if not templated_only or is_template(value):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from template_strings(item, templated_only)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from template_strings(item, templated_only)


def names_read(value: Any, expressions: Iterable[Any] = ()) -> set[str]:
    """The variables read by the templates in `value` (see `template_strings`) and by the bare Jinja `expressions`
    (`when:`, `failed_when:`; each taken as its text): Jinja's undeclared variables, so a loop variable, a `{% set %}`
    name or a macro argument is not a read, and a word of plain text is not one either."""
    found: set[str] = set()
    for text, expression in _texts(value, expressions):
        found |= _names(text, expression)
    return found


def names_in_order(value: Any) -> list[str]:
    """`names_read(value)` in the order the names first appear in the text (the one a message names first)."""
    from jinja2 import nodes

    order: list[str] = []
    for text, expression in _texts(value, ()):
        tree = _parsed(text, expression)
        mentioned = ([node.name for node in tree.find_all(nodes.Name)] if tree is not None
                     else _WORD.findall(text))
        order += [name for name in mentioned if name in _names(text, expression)]
    return list(dict.fromkeys(order))


def attributes_read(value: Any, name: str, expressions: Iterable[Any] = ()) -> set[str] | None:
    """The attributes and constant string subscripts that the templates in `value` and the `expressions` read off the
    variable `name` (`facts.gpus`, `facts['gpus']`, `facts.nvidia.driver_version`: gpus, gpus, nvidia); an empty
    set when none reads `name`. None when any reads it whole (`facts | tojson`, `{% if facts %}`), by a computed or
    non-string key (`facts[key]`), or does not parse (conservative: the caller must assume any part is read)."""
    found: set[str] = set()
    for text, expression in _texts(value, expressions):
        parts = _attributes(text, expression, name)
        if parts is None:
            return None
        found |= parts
    return found


def _texts(value: Any, expressions: Iterable[Any]) -> Iterator[tuple[str, bool]]:
    yield from ((text, False) for text in template_strings(value))
    yield from ((str(text), True) for text in expressions if text is not None)


@functools.cache
def _env() -> Environment:
    """A parse-only environment with the playbooks' syntax in which every filter and test name exists (Jinja checks
    the names when it generates code, which `find_undeclared_variables` does; nothing here is ever called)."""
    import jinja2

    class AnyName(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            return super().get(key, _never_called)

    env = jinja2.Environment(**JINJA_SYNTAX)
    env.filters = AnyName(env.filters)
    env.tests = AnyName(env.tests)
    return env


def _never_called(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("templates_read only parses templates")  # pragma: no cover


@functools.lru_cache(maxsize=4096)
def _parsed(text: str, expression: bool) -> Template | None:
    """The template's AST (a bare expression as `{{ expression }}` would be, parsed as `compile_expression` parses
    it); None when it does not parse."""
    import jinja2
    from jinja2 import nodes
    from jinja2.parser import Parser

    env = _env()
    try:
        if not expression:
            return env.parse(text)
        parser = Parser(env, text, state="variable")
        body = parser.parse_expression()
        if not parser.stream.eos:
            return None
        tree = nodes.Template([nodes.Output([body], lineno=1)], lineno=1)
        tree.set_environment(env)
        return tree
    except jinja2.TemplateSyntaxError:
        return None


@functools.lru_cache(maxsize=4096)
def _names(text: str, expression: bool) -> frozenset[str]:
    import jinja2
    from jinja2 import meta

    tree = _parsed(text, expression)
    if tree is not None:
        try:
            return frozenset(meta.find_undeclared_variables(tree))
        except jinja2.TemplateError:
            pass
    return frozenset(_WORD.findall(text))  # does not parse: every name it mentions


@functools.lru_cache(maxsize=4096)
def _attributes(text: str, expression: bool, name: str) -> frozenset[str] | None:
    from jinja2 import nodes

    if name not in _names(text, expression):
        return frozenset()
    tree = _parsed(text, expression)
    if tree is None:
        return None
    found: set[str] = set()
    through_a_part = 0
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        part: str | None = None
        if isinstance(node, nodes.Getattr):
            part = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            part = node.arg.value
        read = getattr(node, "node", None)
        if not (isinstance(read, nodes.Name) and read.name == name and read.ctx == "load"):
            continue
        if part is None:
            return None  # facts[key], facts[0]
        found.add(part)
        through_a_part += 1
    reads = sum(1 for node in tree.find_all(nodes.Name) if node.name == name and node.ctx == "load")
    return frozenset(found) if reads == through_a_part else None
