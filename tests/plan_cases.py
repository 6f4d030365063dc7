"""Plan cases: os-release + facts + probe output in, the exact planned actions and commands out.

One JSON file per case under tests/plans/<step>/<case>.json (the way pyinfra keeps tests/operations/<op>/*.json):

    {"description": ..., "anchor": {"repository": ..., "path": ..., "checked": ...},
     "os_release": "rocky-9.txt", "facts": {...}, "step": "nvidia_driver", "args": {...},
     "shared": {...}, "probe_output": {SECTION: "what the probe's section printed"},
     "expected": {"probe": ..., "actions": [{"summary", "command", "stdin"?}], "error": ..., ...}}

`run_case` plans a case with the current code; tests/test_plan_cases.py compares that with `expected`.
Scripts shipped in scripts/ appear in commands as `<scripts/NAME>` instead of their whole text.

A case with `"written_by_hand": true` was written from the vendor file its anchor names (repository, path, commit,
line), not frozen from the planner: its `expected` states only what the vendor file decides (the commands, and
where it matters the reason), each action with only the keys it names. `python -m tests.plan_scenarios` keeps such
cases as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpunode.connection import q
from gpunode.errors import GpunodeError
from gpunode.facts import (
    ContainerInfo,
    Facts,
    KernelInfo,
    LockHolder,
    NvidiaInfo,
    PackageManagerInfo,
    PciGpu,
    parse_os_release,
)
from gpunode.inventory import Host
from gpunode.scripts import SCRIPTS_DIR, script_text
from gpunode.steps import build_step
from gpunode.steps.base import StepContext
from gpunode.steps.probe import ProbeOutput
from gpunode.steps.state import HostState

CASES_DIR = Path(__file__).parent / "plans"
OS_RELEASE_DIR = Path(__file__).parent / "data" / "os-release"


def build_facts(os_release: str, spec: dict[str, Any]) -> Facts:
    """Facts from an os-release file of tests/data/os-release and a small dict of what differs from a bare host."""
    os = parse_os_release((OS_RELEASE_DIR / os_release).read_text(), arch=spec.get("arch", "x86_64"))
    kernel = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.get("kernel", {}).items()}
    gpus = tuple(PciGpu(**g) for g in spec.get("gpus", []))
    pkg = dict(spec.get("pkg", {}))
    pkg["lock_holders"] = tuple(LockHolder(**h) for h in pkg.get("lock_holders", []))
    return Facts(
        os=os,
        kernel=KernelInfo(**kernel),
        gpus=gpus,
        nvswitch_present=any(g.is_nvswitch for g in gpus),
        nvidia=NvidiaInfo(**spec.get("nvidia", {})),
        secure_boot=spec.get("secure_boot"),
        pkg=PackageManagerInfo(**pkg),
        containers=ContainerInfo(**spec.get("containers", {})),
        installed_packages=dict(spec.get("installed_packages", {})),
    )


def _scripts_elided(command: str) -> str:
    for path in sorted(SCRIPTS_DIR.glob("*.sh")):
        command = command.replace(q(script_text(path.name)), f"<scripts/{path.name}>")
    return command


def run_case(case: dict[str, Any], reasons: bool = False) -> dict[str, Any]:
    """What the current planner makes of a case, in the form of the case's `expected` (with each action's reason
    when `reasons`)."""
    facts = build_facts(case["os_release"], case.get("facts", {}))
    ctx = StepContext(Host(name="case", address="case"), facts, conn=None, check=True,  # type: ignore[arg-type]
                      probe=ProbeOutput(case.get("probe_output", {})),
                      state=HostState.of({**case.get("shared", {}),
                                          "reboot_required": case.get("reboot_required_before", False)}))
    result: dict[str, Any] = {"probe": None, "actions": [], "error": None}
    try:
        step = build_step(case["step"], case.get("args", {}))
        probe = step.probe(facts)
        result["probe"] = {name: _scripts_elided(snippet) for name, snippet in probe.items()} if probe else None
        actions = step.plan(ctx)
    except GpunodeError as exc:
        result["error"] = {"message": str(exc.cause), "fix": exc.fix}
        return result
    for action in actions:
        item: dict[str, Any] = {"summary": action.summary,
                                "command": _scripts_elided(action.command) if action.command else None}
        if reasons:
            item["reason"] = action.reason
        if action.stdin:
            data = action.stdin
            item["stdin"] = data.decode("utf-8") if isinstance(data, bytes) else data
        if action.reboot:
            item["reboot"] = True
        result["actions"].append(item)
    result["target_kernel"] = ctx.state.target_kernel or None
    result["reboot_required"] = ctx.reboot_required
    if ctx.notes:
        result["notes"] = ctx.notes
    return result


def hand_written_matches(case: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the planner does what a hand-written case states: each key of `expected` (actions compared in order,
    each on the keys it names; the command may be given as `command_contains`, a list of parts in order)."""
    got = run_case(case, reasons=True)
    expected = case["expected"]
    shown = {key: got.get(key) for key in expected}
    if any(got.get(key) != want for key, want in expected.items() if key != "actions"):
        return False, shown
    actions = expected.get("actions")
    if actions is None:
        return True, shown
    if len(actions) != len(got["actions"]):
        return False, shown
    return all(_action_matches(g, w) for g, w in zip(got["actions"], actions, strict=True)), shown


def _action_matches(got: dict[str, Any], want: dict[str, Any]) -> bool:
    for key, value in want.items():
        if key == "command_contains":
            command, at = got.get("command") or "", 0
            for part in value:
                at = command.find(part, at)
                if at < 0:
                    return False
                at += len(part)
        elif got.get(key) != value:
            return False
    return True


def case_files() -> list[Path]:
    """Every case file, sorted."""
    return sorted(CASES_DIR.glob("*/*.json"))


def load(path: Path) -> dict[str, Any]:
    """One case file."""
    return json.loads(path.read_text())
