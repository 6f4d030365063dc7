"""The `json` step: keys merged into a JSON file (daemon.json-style configs), the user's other keys kept.

The host only prints the file (the shared stat + base64 probe); parsing, merging and comparing happen here, on the
controller, and a change is written with the shared atomic write (backup, guarded against concurrent edits).
"""

from __future__ import annotations

import json
import math
import re
import secrets
from dataclasses import dataclass
from typing import Any, ClassVar

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.steps.base import Action, Mode, Step, StepContext, StepFailed, arg, register
from gpunode.steps.files import FileStep, who_probe
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import FileState, parse_file_probe, probe_file
from gpunode.values import file_mode, kind_of

DEFAULT_INDENT = 2


@register
@dataclass
class JsonStep(Step):
    """Merge `set` into the JSON object in `path` (nested objects merged key by key; other values replaced)."""

    kind = "json"
    needs_root = False  # the user's own files and commands may need no root
    facts_sections: ClassVar[frozenset[str]] = frozenset()  # reads no optional fact section
    path: str = arg(doc="the JSON file (absolute)")
    set: dict[str, Any] = arg(doc="top-level keys to JSON values; objects merged key by key, other values "
                                 "replaced")
    create: bool = arg(True, "a missing file becomes {} + the keys")
    mode: Mode | None = arg(None, "permissions, quoted: '0644'")
    owner: str | None = arg(None, "the owning user")
    group: str | None = arg(None, "the owning group")
    backup: bool = arg(True, "keep a timestamped backup of the old file")

    def __post_init__(self) -> None:
        if not self.path.startswith("/") or self.path.endswith("/"):
            raise ValueError(f"json.path must be an absolute file path, got {self.path!r}")
        if not self.set:
            raise ValueError("json.set is empty: give the keys to set, e.g. set: {log-level: warn}")
        self.set = json_value(self.set, "json.set")
        if self.mode is not None:
            self.mode = Mode(file_mode(self.mode, "json.mode"))

    def probe(self, facts: Facts) -> Snippets:
        return {"file": probe_file(self.path), "directory": f"[ -d {q(self.path)} ] && echo directory",
                **who_probe(self.owner, self.group)}

    def plan(self, ctx: StepContext) -> list[Action]:
        if ctx.probe["directory"].strip() == "directory":
            raise StepFailed(f"{self.path} is a directory on the host; json.path must name a JSON file",
                             fix=f"give the file's path (e.g. {self.path.rstrip('/')}/config.json)")
        state = parse_file_probe(ctx.probe["file"])
        if not state.exists and not self.create:
            raise StepFailed(f"{self.path} does not exist (create is false)",
                             fix=f"create {self.path} first, or set create: true")
        current = parse_object(self.path, state)
        merged = merge(current, self.set)
        converged = state.exists and same(merged, current)  # then only mode/owner/group may still differ
        content = state.content if converged else dump(merged, state.content)
        # the file step plans the write (atomic, backup) or the chmod/chown, from the same probe section
        actions = FileStep(self.path, content, self.mode, self.owner, self.group, backup=self.backup).plan(ctx)
        changed = [key for key in self.set if key not in current or not same(merged[key], current[key])]
        for action in actions:
            if action.stdin:
                action.reason = f"{'sets' if state.exists else 'new file with'} {', '.join(changed)}"
        return actions


def json_value(value: Any, where: str) -> Any:
    """`value` as plain JSON data (dicts with string keys, lists, strings, finite numbers, booleans, null);
    anything else is a ValueError naming where it is and how to write it."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} (a {kind_of(key)}) is not a string, and JSON keys "
                                 f"are strings; quote it ('{key}')")
            out[key] = json_value(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [json_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a JSON number; quote it to write a string")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"{where}: a {kind_of(value)} ({value}) is not a JSON value; quote it to write a "
                     "string")


def parse_object(path: str, state: FileState) -> dict[str, Any]:
    """The file's JSON object ({} for a missing or empty file); a file that is not a JSON object fails the step,
    and nothing is written."""
    if not state.exists or not state.content.strip():
        return {}
    if state.content.startswith("\ufeff"):
        raise StepFailed(f"{path} starts with a UTF-8 byte order mark (BOM), which strict JSON readers (dockerd, Go, "
                         "jq) refuse; it was left untouched", fix=f"remove the mark (the first 3 bytes): "
                         f"sed -i '1s/^\\xEF\\xBB\\xBF//' {q(path)}, then run again")
    try:
        data = json.loads(state.content, parse_constant=_not_json, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise StepFailed(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); it was "
                         "left untouched", fix=f"fix {path} by hand (or restore a backup, {path}.*.gpunode.bak), "
                         "then run again") from None
    if not isinstance(data, dict):
        raise StepFailed(f"{path} holds a JSON {kind_of(data, json=True)}, not an object: keys cannot be merged "
                         "into it; it was left untouched", fix=f"make {path} a JSON object ({{...}}), or remove it")
    return data


def _not_json(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a JSON value (strict parsers such as dockerd's refuse it)", name, 0)


class Number(float):
    """A number with a fraction or an exponent as the file writes it (1E5, 1.50): written back unchanged."""

    text: str

    def __new__(cls, text: str) -> Number:
        value = super().__new__(cls, text)
        value.text = text
        return value


def _finite(text: str) -> float:
    value = Number(text)
    if value in (float("inf"), float("-inf")):
        raise json.JSONDecodeError(f"{text} is out of a float's range: it could only be written back as Infinity, "
                                   "which is not JSON", text, 0)
    return value


def _marked(data: Any, nonce: str, numbers: list[str]) -> Any:
    """`data` with each file Number replaced by a placeholder string (json.dumps writes floats in its own way)."""
    if isinstance(data, dict):
        return {k: _marked(v, nonce, numbers) for k, v in data.items()}
    if isinstance(data, list):
        return [_marked(v, nonce, numbers) for v in data]
    if isinstance(data, Number):
        numbers.append(data.text)
        return f"{nonce}{len(numbers) - 1}"
    return data


def merge(current: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """`current` with `updates` merged in: objects on both sides merged key by key, any other value replaced;
    existing keys keep their place, new keys come last."""
    merged = dict(current)
    for key, value in updates.items():
        old = merged.get(key)
        merged[key] = merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (Python's 1 == 1.0 == True are three different JSON values)."""
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def dump(data: dict[str, Any], old_text: str) -> str:
    """The file's new text: the old file's indentation (2 for a new or one-line file), non-ASCII kept as written,
    a final newline; CRLF if the old file used it."""
    nonce, numbers = f"@@gpunode-number-{secrets.token_hex(6)}-", list[str]()
    text = json.dumps(_marked(data, nonce, numbers), indent=indent_of(old_text), ensure_ascii=False) + "\n"
    text = re.sub(f'"{nonce}(\\d+)"', lambda m: numbers[int(m.group(1))], text)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise StepFailed("the file holds a lone UTF-16 surrogate escape (\\ud800-\\udfff) that cannot be written "
                         "back as UTF-8; it was left untouched", fix="fix that string in the file by hand") from None
    return text.replace("\n", "\r\n") if "\r\n" in old_text else text


def indent_of(text: str) -> int | str:
    """The indentation of the first indented line: a tab, or 1 to 8 spaces; else DEFAULT_INDENT."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        lead = line[: len(line) - len(stripped)]
        if stripped and lead:
            if "\t" in lead:
                return "\t"
            return len(lead) if len(lead) <= 8 else DEFAULT_INDENT
    return DEFAULT_INDENT
