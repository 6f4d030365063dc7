"""Layers that never reach up, and no import cycles: read from the code's own imports.

Every import of every module under gpunode/ counts: at the top, inside functions (lazy imports), under
`if TYPE_CHECKING:` (a type-only import still ties the two modules together; use a protocol or move the type), and
a module named in a lazy-import table (a string "gpunode.x.y" given to importlib later). A module may import only
from its own layer or a lower one. No two packages may import each other (directly or around a loop), and no two
modules either.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gpunode"

# The layers, lowest first: the key is the layer's name, the value the top-level names under gpunode/ (a package
# or a module) that make it up. "" is gpunode/__init__.py itself (__version__).
LAYERS: dict[str, tuple[str, ...]] = {
    # L0 core: errors, plain values, YAML reading, vendor ids, the shipped shell scripts, kubectl/CLI helpers
    # (kube_npd, kube_drain: Kubernetes objects and API calls, vendor facts and errors only);
    # templates_read: what templates read (Jinja's AST; the facts ask too, so below them); vendor_aws is vendor
    # data (Amazon's; the distros' AMI facts are in their adapters)
    "core": ("", "errors", "values", "yamlfile", "vendor_facts", "vendor_aws", "scripts", "kube", "kube_npd",
             "kube_drain", "kube_api", "cliflags", "clihelp", "markdown", "templates_read"),
    "inventory": ("inventory",),            # L1 Ansible inventories, host patterns
    "connection": ("connection",),          # L2 SSH/local connections, sudo, transcripts
    # L3 named parsers of probe outputs, the host facts, and the distro adapters: facts reads the os-release
    # identity rules (distros/identity.py) and parsers the adapters' names; the adapters import neither (they take
    # the facts through protocols), so the layer has no loop
    "parsers": ("parsers", "facts", "distros"),
    # L4 GPU/driver knowledge; the test lab (it provisions nothing: it starts hosts of the lab distro, whose suites,
    # cloud user and archive are the adapter's); the serverless clouds' GPU pods (gpupod: core imports only); the
    # schedulers a node drains from (Slurm; drain/resume, config lines; the lab's Slurm cluster writes its slurm.conf)
    "gpu": ("gpu", "lab", "gpupod", "schedulers"),
    # L5 the caches of the run: built modules (key, store, remote, coord), shared package files; no steps
    "modcache": ("modcache", "pkgshare"),
    "steps": ("steps",),                    # L6 step kinds: plan and apply
    "playbook": ("playbook",),              # L7 playbooks: load, validate, template
    "report": ("report",),                  # L8 the one output path: console, text, live view, summary, JUnit
    "runner": ("runner",),                  # L9 hosts in parallel, steps in order
    "verify": ("verify", "accept"),        # L10 GPU health: captures, checks, findings; acceptance tiers
    "app": ("app",),                        # L11 load hosts, parse vars, run a playbook, verify a host
    "image": ("image",),                    # L12 image builds (Packer, bake, user data)
    "clouds": ("clouds",),                  # L13 image builder plug-ins, one module per cloud (image hands them in)
    "commands": ("commands",),              # L14 one module per command family
    "entry": ("cli", "tasks", "task_groups", "__main__", "docgen"),  # L15 console script, tasks (by group), docs
}
LEVEL = {top: (level, name) for level, (name, tops) in enumerate(LAYERS.items()) for top in tops}


def modules() -> dict[str, Path]:
    """Every module under gpunode/ by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported gpunode module, line) for every import in the file: `from pkg import mod` names the module."""
    return imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")


def imports_in(source: str, name: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """The imports of one module's source (`name` and `is_package` resolve relative imports)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            yield node.value, node.lineno  # a lazy-import table's entry (importlib.import_module(NAME) later)
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "gpunode")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            if base.split(".")[0] != "gpunode":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES else base), node.lineno


EDGES = {name: sorted(set(imports(name, path))) for name, path in MODULES.items()}


def top(name: str) -> str:
    """gpunode.steps.nfs.mount -> steps; gpunode -> ""."""
    return name.split(".")[1] if "." in name else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


Edges = dict[str, list[tuple[str, int]]]


def where(name: str) -> str:
    """A module's file, relative to the repository."""
    path = MODULES.get(name)
    return str(path.relative_to(REPO)) if path else name.replace(".", "/") + ".py"


def explain(group: list[str], unit, edges: Edges) -> list[str]:
    """The import lines that tie a cycle's members together (file:line)."""
    members = set(group)
    return [f"{where(m)}:{line} {m} -> {t}" for m, targets in edges.items() if unit(m) in members
            for t, line in targets if unit(t) in members and unit(t) != unit(m)]


def upward_imports(edges: Edges) -> list[str]:
    """Each import from a lower layer to a higher one, as file:line, both modules and both layers."""
    upward = []
    for name, targets in edges.items():
        (mine, my_layer) = LEVEL[top(name)]
        for target, line in targets:
            (theirs, their_layer) = LEVEL[top(target)]
            if theirs > mine:
                upward.append(f"{where(name)}:{line}: {name} (L{mine} {my_layer}) imports {target} "
                              f"(L{theirs} {their_layer})")
    return upward


def package_cycles(edges: Edges) -> list[str]:
    """Packages (the top-level names under gpunode/: the units of LAYERS) that import each other, with the lines."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, targets in edges.items():
        graph[top(name)].update(top(t) for t, _ in targets if top(t) != top(name))
    return [f"{group}:\n  " + "\n  ".join(explain(group, top, edges)) for group in cycles(graph)]


def module_cycles(edges: Edges) -> list[str]:
    graph = {name: {t for t, _ in targets if t != name} for name, targets in edges.items()}
    return [f"{group}:\n  " + "\n  ".join(explain(group, lambda m: m, edges)) for group in cycles(graph)]


def test_every_module_has_a_layer():
    unknown = sorted({top(m) for m in MODULES} - set(LEVEL))
    assert not unknown, f"gpunode/{unknown} is in no layer: add it to LAYERS in tests/test_layers.py"


def test_no_import_reaches_up():
    found = upward_imports(EDGES)
    assert not found, "imports from a lower layer to a higher one:\n" + "\n".join(found)


def test_no_cycle_between_packages():
    """A loop between two packages of one layer fails too."""
    found = package_cycles(EDGES)
    assert not found, "packages that import each other:\n" + "\n".join(found)


def test_no_cycle_between_modules():
    found = module_cycles(EDGES)
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_the_checks_fail_on_what_they_forbid():
    """The checks themselves, on made-up imports: the shapes this redesign removed are each caught."""
    assert upward_imports({"gpunode.image.bake": [("gpunode.commands.common", 18)]}) == [
        "gpunode/image/bake.py:18: gpunode.image.bake (L12 image) imports gpunode.commands.common (L14 commands)"]
    loop = {"gpunode.modcache.plan": [("gpunode.steps.base", 16)],
            "gpunode.steps.nvidia": [("gpunode.modcache.plan", 27)]}
    (found,) = package_cycles(loop)
    assert "['modcache', 'steps']" in found and "gpunode/steps/nvidia.py:27" in found
    same_layer = {"gpunode.parsers.x": [("gpunode.facts.y", 1)], "gpunode.facts.y": [("gpunode.parsers.x", 2)]}
    assert package_cycles(same_layer) and not upward_imports(same_layer)
    lazy = {"gpunode.facts.model": [("gpunode.facts.parse", 254)], "gpunode.facts.parse": [("gpunode.facts.model", 9)]}
    assert not package_cycles(lazy) and len(module_cycles(lazy)) == 1


SAMPLE = """
from __future__ import annotations
from typing import TYPE_CHECKING
import gpunode.errors
from gpunode.steps import base, build_step
from .sibling import thing
if TYPE_CHECKING:
    from gpunode.inventory import Host
def lazy():
    from gpunode.report.text import line
TABLE = {"say": "gpunode.report.text"}
"""


def test_the_walk_sees_every_kind_of_import():
    """Top-level, relative, type-only and lazy imports and lazy-import tables are all found (a walk that missed one
    would prove nothing); `from package import module` names the module, `from package import name` the package."""
    found = sorted(imports_in(SAMPLE, "gpunode.facts.model", is_package=False))
    assert found == [("gpunode.errors", 4), ("gpunode.facts.sibling", 6), ("gpunode.inventory", 8),
                     ("gpunode.report.text", 10), ("gpunode.report.text", 11), ("gpunode.steps", 5),
                     ("gpunode.steps.base", 5)]
    assert len(MODULES) > 150 and all(EDGES[m] for m in ("gpunode.tasks", "gpunode.runner.run"))


PRINTING = ("report", "commands", "entry", "lab")  # report/ is the output path; commands and tasks print results


def test_only_the_output_path_and_the_commands_print():
    """print() below the commands (image builds, the app layer, steps...) goes through gpunode.report instead."""
    allowed = {top for name in PRINTING for top in LAYERS.get(name, (name,))}
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for name, path in MODULES.items() if top(name) not in allowed
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"]
    assert not found, "print() outside the output path (use gpunode.report.text.say or a console):\n" + "\n".join(found)
