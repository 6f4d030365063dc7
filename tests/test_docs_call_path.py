"""docs/design.md's "One provision, function by function" names the call path as `path/to/module.py:name`: every
such name must still be defined where the page says (read with ast, nothing imported), so that a rename or a move
fails here instead of leaving the page stale."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADING = "## One provision, function by function"
REF = re.compile(r"`([\w./-]+\.py):([A-Za-z_][\w.]*)`")
PATH = re.compile(r"`((?:gpunode|scripts|tests)/[\w./-]+\.(?:py|sh))`")
BARE = re.compile(r"`((?:[A-Z]\w*\.)?_?[A-Za-z_]\w*)`")  # `HostRun._reboot`, `_run_batch`: in a file the hop names


def section() -> str:
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    assert HEADING in text, f"docs/design.md has no {HEADING!r} section"
    body = text.split(HEADING, 1)[1]
    return body.split("\n## ", 1)[0]


def hops() -> list[str]:
    """The numbered list's items, each joined into one line."""
    items: list[str] = []
    for line in section().splitlines():
        if re.match(r"\d+\. ", line):
            items.append(line)
        elif items and line.startswith("   "):
            items[-1] += " " + line.strip()
    return items


@functools.cache
def names(path: str) -> frozenset[str]:
    """What the module defines: top-level functions, classes and assigned names, `Class.member` for what a class
    body defines, and every def anywhere in the file."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                found |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(f"{node.name}.{member.name}")
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    found.add(f"{node.name}.{member.target.id}")
    found |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return frozenset(found)


def test_the_call_path_is_a_numbered_list_from_the_console_script_to_the_exit_code():
    items = hops()
    assert 12 <= len(items) <= 20, f"{len(items)} hops: keep one line of the path per hop, 12 to 20 of them"
    for number, item in enumerate(items, 1):
        assert item.startswith(f"{number}. `") and REF.match(item, len(f"{number}. ")), (
            f"hop {number} must start with its `path/to/module.py:function`: {item[:80]}")
    assert REF.search(items[0]).groups() == ("gpunode/tasks.py", "console_main")


def test_every_module_and_name_the_call_path_gives_exists():
    missing = []
    for item in hops():
        files = [path for path, _ in REF.findall(item)]
        for path, name in REF.findall(item):
            if not (REPO / path).is_file():
                missing.append(f"{path} (no such file)")
            elif name not in names(path):
                missing.append(f"{path}:{name}")
        for path in PATH.findall(item):
            if not (REPO / path).is_file():
                missing.append(f"{path} (no such file)")
        for name in BARE.findall(item):
            if ("." in name or name.startswith("_")) and not any(name in names(path) for path in files):
                missing.append(f"{name} (in none of {', '.join(files)})")
    assert missing == [], "docs/design.md's call path names what the code no longer has: " + "; ".join(missing)


def test_a_renamed_function_is_caught():
    """The check itself: a name a module does not define is not found."""
    assert "run_playbook" in names("gpunode/runner/run.py")
    assert "HostRun.run" in names("gpunode/runner/host_run.py")
    assert "run_playbooks" not in names("gpunode/runner/run.py")
    assert "HostRun.walk" not in names("gpunode/runner/host_run.py")
