"""YAML loading that remembers the line of every mapping key, for errors that say file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpunode.errors import UsageError


class LineDict(dict):
    """A dict that knows the 1-based source line of each key (``key_lines``) and of itself (``line``)."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    """A list that knows the 1-based source line of each item."""

    line: int = 0
    item_lines: list[int]


class TextFloat(float):
    """A YAML float that remembers how it was written: `version: 1.10` is 1.1 as a number, but where a string is
    wanted (a step's str argument, a template) it stays "1.10", as Ansible keeps it; plain YAML would make it "1.1"."""

    text: str

    def __new__(cls, value: float, text: str | None = None) -> TextFloat:
        number = super().__new__(cls, value)
        number.text = text if text is not None else float.__repr__(number)
        return number

    def __str__(self) -> str:
        return self.text


class _LineLoader(yaml.SafeLoader):
    def construct_text_float(self, node: yaml.ScalarNode) -> Any:
        number = self.construct_yaml_float(node)
        return TextFloat(number, node.value) if isinstance(number, float) else number

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineDict:  # type: ignore[override]
        own = {id(key_node) for key_node, _ in node.value}  # keys written here, not merged in by `<<:`
        self.flatten_mapping(node)
        result = LineDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        written: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError as exc:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key", key_node.start_mark
                ) from exc
            if id(key_node) in own:
                if key in written:  # PyYAML keeps the last silently; Ansible only warns
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (also at line {written[key]}): YAML keeps only the last, "
                        "so the other is lost", key_node.start_mark)
                written[key] = key_node.start_mark.line + 1
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LineList:  # type: ignore[override]
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _LineLoader.construct_sequence)
_LineLoader.add_constructor("tag:yaml.org,2002:float", _LineLoader.construct_text_float)


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error becomes a UsageError naming source:line."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise UsageError(
            f"malformed YAML: {exc.problem or exc}",
            fix="keep one of the two keys" if str(exc.problem).startswith("duplicate key") else
            "fix the YAML syntax at that line (indentation, quotes, a missing ':')",
            source=source,
            line=line,
        ) from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"malformed YAML: {exc}", source=source, fix="fix the YAML syntax") from exc


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file with line-aware containers."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", source=str(path), fix="check the path") from exc
    return load_yaml_text(decode_utf8(data, str(path)), str(path))


def decode_utf8(data: bytes, source: str) -> str:
    """A playbook's or inventory's text; bytes that are not UTF-8 (a binary file, a Latin-1 editor) are a file:line
    error."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UsageError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} cannot be decoded"
            + (" (this looks like a binary file)" if b"\0" in data[:8192] else ""),
            source=source, line=line,
            fix="playbooks and inventories are UTF-8 text: convert it (e.g. `iconv -f latin1 -t utf-8 FILE > NEW`) "
            "or check that the path names the file you meant") from None
