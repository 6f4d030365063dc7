"""Markdown helpers for the generated pages and `gpunode steps`: table cells, code spans, values as a playbook
writes them."""

from __future__ import annotations

from typing import Any


def cell(text: Any) -> str:
    """Text fit for one Markdown table cell (pipes escaped, one line)."""
    return prose(" ".join(str(text).split()).replace("|", "\\|"))


def prose(text: str) -> str:
    """Markdown that shows `<name>` as written outside code spans (else it would be read as an HTML tag)."""
    parts = text.split("`")
    return "`".join(p.replace("<", "\\<") if i % 2 == 0 else p for i, p in enumerate(parts))


def code(text: str) -> str:
    """Inline code that may itself hold backticks."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [f"| {' | '.join(header)} |", "|" + "---|" * len(header), *(f"| {' | '.join(r)} |" for r in rows)]


def yaml_value(value: Any) -> str:
    """A value as a playbook would write it: none, true, 3600, "" or [a, b]."""
    import yaml

    if value is None:
        return "none"
    if value == "":
        return '""'
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).removesuffix("\n...\n").strip()
