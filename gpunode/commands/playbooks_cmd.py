"""`playbooks`: the built-in playbooks, their tags, variables and defaults, read from the playbook files."""

from __future__ import annotations

import json
import textwrap

from gpunode.playbook.builtin import builtin_path
from gpunode.playbook.catalog import PlaybookInfo, describe_builtins, yaml_value


def list_playbooks(as_json: bool = False, show: str | None = None) -> str:
    """The listing (text or JSON), or with `show` the text of one built-in playbook."""
    if show:
        return builtin_path(show, "--show").read_text(encoding="utf-8")
    infos = describe_builtins()
    if as_json:
        return json.dumps([i.to_dict() for i in infos], indent=2) + "\n"
    return "".join(_text(i) for i in infos) + (
        "Use one with --playbook NAME, or include it in your own playbook (`- include: gpu-node`, with `vars:`).\n"
        "Variables: the playbook's defaults < your inventory (group_vars, host_vars) < --var KEY=VALUE.\n")


def _text(info: PlaybookInfo) -> str:
    about = textwrap.fill(info.description.split(" Tags (")[0], 110, initial_indent="  ", subsequent_indent="  ")
    lines = [f"{info.name}  ({info.path})", about]
    if info.tags:
        lines.append(f"  tags: {', '.join(info.tags)}")
    width = max((len(v.name) for v in info.variables), default=0)
    for var in info.variables:
        value = "(required)" if var.required else yaml_value(var.default)
        comment = f"  # {var.comment}" if var.comment and not var.required else ""
        lines.append(f"    {var.name.ljust(width)} = {value}{comment}")
    return "\n".join(lines) + "\n\n"
