"""Ansible's common Jinja filters, with Ansible's semantics (ansible/ansible lib/ansible/plugins/filter/core.py).

Jinja's own `default`/`d` (same arguments and meaning as Ansible's), `int`, `float`, `string`, `lower`, `upper` and
`join` are used as they are; `bool` is gpunode.values.bool_filter. The `version` test lives in playbook/tests.py.
"""

from __future__ import annotations

import base64
import json
import os.path
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml


class FilterError(ValueError):
    """A filter was used wrongly (Ansible's AnsibleFilterError): the message says how."""


def _text(value: Any) -> str:
    """Ansible's to_text for a filter's input: strings as they are, anything else as str()."""
    return value if isinstance(value, str) else str(value)


def quote(value: Any) -> str:
    """Quoted for the shell (`shlex.quote`); None is ''."""
    return shlex.quote("" if value is None else _text(value))


def _flags(ignorecase: bool, multiline: bool) -> int:
    return (re.I if ignorecase else 0) | (re.M if multiline else 0)


def regex_replace(value: Any = "", pattern: str = "", replacement: str = "", ignorecase: bool = False,
                  multiline: bool = False, count: int = 0, mandatory_count: int = 0) -> str:
    """`re.sub`; `mandatory_count`: fail unless exactly that many replacements were made."""
    output, subs = re.compile(pattern, _flags(ignorecase, multiline)).subn(replacement, _text(value), count=count)
    if mandatory_count and mandatory_count != subs:
        raise FilterError(f"'{pattern}' should match {mandatory_count} times, but matches {subs} times")
    return output


def regex_search(value: Any, regex: str, *args: str, ignorecase: bool = False, multiline: bool = False) -> Any:
    """`re.search`: the match, or the groups named by '\\1' / '\\g<name>' arguments (a list); None when none."""
    groups: list[int | str] = []
    for arg in args:
        named = re.match(r"\\g<(\S+)>", arg)
        numbered = re.match(r"\\(\d+)", arg)
        if not (named or numbered):
            raise FilterError("Unknown argument")
        groups.append(named.group(1) if named else int(numbered.group(1)))  # type: ignore[union-attr]
    match = re.search(regex, _text(value), _flags(ignorecase, multiline))
    if not match:
        return None
    return [match.group(g) for g in groups] if groups else match.group()


def b64encode(value: Any, encoding: str = "utf-8", urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(_text(value).encode(encoding)).decode("ascii")


def b64decode(value: Any, encoding: str = "utf-8", urlsafe: bool = False) -> str:
    decode = base64.urlsafe_b64decode if urlsafe else base64.b64decode
    return decode(_text(value).encode()).decode(encoding)


def from_json(value: str, **kwargs: Any) -> Any:
    return json.loads(value, **kwargs)


def to_yaml(value: Any, *_args: Any, default_flow_style: bool | None = None, **kwargs: Any) -> str:
    """Terse YAML (flow style for inner collections), as Ansible's."""
    return yaml.dump(value, Dumper=yaml.SafeDumper, allow_unicode=True, default_flow_style=default_flow_style,
                     **kwargs)


def to_nice_yaml(value: Any, indent: int = 4, *_args: Any, default_flow_style: bool = False, **kwargs: Any) -> str:
    return to_yaml(value, indent=indent, default_flow_style=default_flow_style, **kwargs)


def from_yaml(value: Any) -> Any:
    """A YAML string parsed (safely); None stays None, other non-strings are returned as they are."""
    return yaml.safe_load(value) if isinstance(value, str) else value


def basename(value: Any) -> str:
    return os.path.basename(_text(value))


def dirname(value: Any) -> str:
    return os.path.dirname(_text(value))


def ternary(value: Any, true_val: Any, false_val: Any, none_val: Any = None) -> Any:
    """`value ? true_val : false_val`; `none_val` (when given) for None."""
    if value is None and none_val is not None:
        return none_val
    return true_val if value else false_val


def mandatory(value: Any, msg: str | None = None) -> Any:
    """Fail when the value is undefined ("Mandatory variable 'x' not defined."), else return it."""
    import jinja2

    if isinstance(value, jinja2.Undefined):
        if msg is not None:
            raise FilterError(str(msg))
        name = getattr(value, "_undefined_name", None)
        raise FilterError(f"Mandatory variable {repr(name) + ' ' if name is not None else ''}not defined.")
    return value


def dict2items(mapping: Any, key_name: str = "key", value_name: str = "value") -> list[dict[str, Any]]:
    if not isinstance(mapping, Mapping):
        raise FilterError(f"dict2items requires a dictionary, got {type(mapping).__name__} instead.")
    return [{key_name: key, value_name: mapping[key]} for key in mapping]


def items2dict(items: Any, key_name: str = "key", value_name: str = "value") -> dict[Any, Any]:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise FilterError(f"items2dict requires a list, got {type(items).__name__} instead.")
    try:
        return {item[key_name]: item[value_name] for item in items}
    except KeyError:
        raise FilterError(f"items2dict requires each dictionary in the list to contain the keys '{key_name}' "
                          f"and '{value_name}', got {items!r} instead.") from None
    except TypeError:
        raise FilterError(f"items2dict requires a list of dictionaries, got {items!r} instead.") from None


LIST_MERGE = ("replace", "keep", "append", "prepend", "append_rp", "prepend_rp")


def _merge_lists(low: list, high: list, how: str) -> list:
    """Ansible's list_merge for two lists at the same key (`high` is the later dictionary's)."""
    if how == "keep":
        return low
    if how == "append":
        return low + high
    if how == "prepend":
        return high + low
    if how == "append_rp":
        return [x for x in low if x not in high] + high
    if how == "prepend_rp":
        return high + [x for x in low if x not in high]
    return high


def merge_hash(low: Mapping, high: Mapping, recursive: bool, list_merge: str) -> dict:
    """Ansible's utils.vars.merge_hash: `high` wins; dictionaries merge key by key when `recursive`."""
    result = dict(low)
    for key, value in high.items():
        old = result.get(key)
        if recursive and isinstance(old, Mapping) and isinstance(value, Mapping):
            result[key] = merge_hash(old, value, recursive, list_merge)
        elif isinstance(old, list) and isinstance(value, list):
            result[key] = _merge_lists(old, value, list_merge)
        else:
            result[key] = value
    return result


def combine(*terms: Any, recursive: bool = False, list_merge: str = "replace") -> dict:
    """Merge dictionaries left to right (`a | combine(b, c)` or `[a, b] | combine`)."""
    if list_merge not in LIST_MERGE:
        raise FilterError(f"'{list_merge}' is not a valid list_merge value (valid: {', '.join(LIST_MERGE)})")
    dicts: list[Any] = []
    for term in terms:
        dicts += [t for t in term if t is not None] if isinstance(term, list | tuple) else [term]
    for item in dicts:
        if not isinstance(item, Mapping):
            raise FilterError(f"combine expects dictionaries, got {type(item).__name__}")
    result: dict = {}
    for item in dicts:
        result = merge_hash(result, item, recursive, list_merge)
    return result


def to_json(value: Any, default: Callable[[Any], Any] | None = None, **kwargs: Any) -> str:
    return json.dumps(value, default=default, **kwargs)


FILTERS: dict[str, Callable[..., Any]] = {
    "quote": quote, "regex_replace": regex_replace, "regex_search": regex_search, "b64encode": b64encode,
    "b64decode": b64decode, "from_json": from_json, "to_yaml": to_yaml, "to_nice_yaml": to_nice_yaml,
    "from_yaml": from_yaml, "basename": basename, "dirname": dirname, "ternary": ternary, "mandatory": mandatory,
    "dict2items": dict2items, "items2dict": items2dict, "combine": combine,
}
