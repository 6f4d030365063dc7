"""Variables given on the command line: `--var K=V` (values read as YAML scalars) and Ansible's `-e/--extra-vars`:
`k=v` pairs (several in one argument, quoted like a shell), `@file` (YAML or JSON) and inline JSON or YAML
(`-e '{"driver_branch": 550}'`). Values are typed as `--var` types them (YAML scalars), where Ansible keeps `k=v`
values as strings; the playbook's declared defaults then check them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from gpunode.errors import UsageError

FIX = "e.g. -e driver_branch=550, -e @vars.yml or -e '{\"driver_branch\": 550}'"


def parse_extra_vars(items: list[str]) -> dict[str, Any]:
    """All `-e` arguments merged in order (a later one wins, as in Ansible)."""
    result: dict[str, Any] = {}
    for item in items:
        text = item.strip()
        if text.startswith("@"):
            result.update(_from_file(text[1:]))
        elif text.startswith(("{", "[")):
            result.update(_mapping(text, f"-e {_short(text)}"))
        else:
            result.update(_pairs(text))
    return result


def as_var_pairs(variables: dict[str, Any]) -> list[str]:
    """`--var K=V` strings that `parse_vars` reads back to the same values (JSON is YAML): for what passes
    variables on as text (user data, the image build's spec)."""
    return [f"{key}={json.dumps(value)}" for key, value in variables.items()]


def parse_vars(pairs: list[str]) -> dict[str, Any]:
    """`--var k=v` pairs; values parsed as YAML scalars (true, 3, [a, b]; 1.10 stays "1.10" as a string)."""
    from gpunode.yamlfile import load_yaml_text

    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--var {pair!r} is not KEY=VALUE", source="--var", fix="e.g. --var driver_branch=580")
        try:
            result[key] = load_yaml_text(value, "--var") if value else ""
        except UsageError:  # not YAML (a ': ' inside, an unclosed bracket): the text as given
            result[key] = value
    return result


def _pairs(text: str) -> dict[str, Any]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"-e {text!r}: {exc}", fix=FIX) from None
    if not words:
        raise UsageError("-e needs KEY=VALUE, @FILE or a JSON/YAML mapping", fix=FIX)
    for word in words:
        key, sep, _ = word.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"-e {word!r} is not KEY=VALUE", fix=FIX)
    return parse_vars(words)


def _from_file(name: str) -> dict[str, Any]:
    path = Path(name).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"-e @{name}: cannot read the file: {reason}", fix="give a YAML or JSON file of "
                         "variables, e.g. -e @vars.yml (the path is relative to this folder)") from None
    return _mapping(text, f"-e @{name}")


def _mapping(text: str, label: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise UsageError(f"{label}: not valid YAML or JSON{where}: {getattr(exc, 'problem', None) or exc}",
                         fix=FIX) from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and k.isidentifier() for k in data):
        raise UsageError(f"{label}: extra variables must be a mapping of names to values", fix=FIX)
    return data


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
