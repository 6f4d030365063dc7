"""Plan cases written by hand: facts and probe output in, the planned actions (command, reason, diff) out.

One YAML file per step kind, `tests/plans/<kind>.yaml`, a list of cases:

    - name: debian12-fresh                      # unique in the file
      says: one sentence: what the vendor file decides here
      source: {repo: owner/name, path: file, ref: <40-hex commit>, line: 12}   # or {url: "https://..."}
      os: debian-12                             # tests/data/os-release/<os>.txt (default debian-12)
      image: al2023                             # or: start from a base image's pinned state (gpunode/image/states/):
                                                # its facts, and its answers to the step's probe (no `os`/`probe`)
      facts: {kernel: {...}, pkg: {...}, ...}   # what differs from a bare host (build_facts)
      args: {...}                               # the step's arguments
      shared: {...}                             # HostState from earlier steps
      probe: {section: "what it printed\n", file: {content: "...", mode: "600"}}
      expect: {actions: [{summary, command | contains, reason, diff}], reboot_required, target_kernel, notes}
      # or expect: {error: {message, fix}} (a refused plan, or arguments the step refuses);
      # xfail: "why" when the planner is wrong against the source;
      # check: false plans as a real run does (default: check mode)

`run_case` plans a case with the current code; tests/test_plan_cases.py compares it with `expect` (each key named,
each action on the keys it names) and checks every case's shape (`problems`). Scripts from gpunode/_scripts appear
in commands as `<scripts/NAME>`; diffs as the user sees them (capped as the runner caps them).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import yaml

from gpunode.connection import q
from gpunode.errors import GpunodeError
from gpunode.facts import (
    ContainerInfo,
    DkmsEntry,
    Facts,
    KernelInfo,
    LockHolder,
    NvidiaInfo,
    PackageManagerInfo,
    PciGpu,
    parse_os_release,
)
from gpunode.image.image_state import answer, facts_of, load_state
from gpunode.inventory import Host
from gpunode.scripts import SCRIPTS_DIR, script_text
from gpunode.steps import build_step
from gpunode.steps.base import Step, StepContext, argument_fix
from gpunode.steps.diffs import DEFAULT_MAX_DIFF_SIZE, render
from gpunode.steps.probe import ProbeOutput
from gpunode.steps.state import HostState

CASES_DIR = Path(__file__).parent / "plans"
OS_RELEASE_DIR = Path(__file__).parent / "data" / "os-release"
DEFAULT_OS = "debian-12"
MAX_LINES = 12_000  # the whole tests/plans tree

CASE_KEYS = {"name", "says", "source", "os", "image", "facts", "args", "shared", "probe", "expect", "xfail", "check"}
EXPECT_KEYS = {"actions", "error", "reboot_required", "target_kernel", "notes"}
ACTION_KEYS = {"summary", "command", "contains", "reason", "diff", "stdin", "reboot"}
HEX40 = re.compile(r"[0-9a-f]{40}")


# ---- loading -------------------------------------------------------------------------------------------------
def case_files() -> list[Path]:
    """Every tests/plans/<kind>.yaml, sorted."""
    return sorted(CASES_DIR.glob("*.yaml"))


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of one file, each with its `kind` (the file's stem) added."""
    data = yaml.safe_load(path.read_text()) or []
    if not isinstance(data, list):
        raise ValueError(f"{path}: a plan case file is a YAML list of cases")
    return [{**case, "kind": path.stem} for case in data]


def all_cases() -> list[dict[str, Any]]:
    """Every case of every file, in file order."""
    return [case for path in case_files() for case in load_cases(path)]


def find_case(kind: str, name: str) -> dict[str, Any]:
    """One case by its kind and name (for tests that plan a case's host with other arguments)."""
    found = [c for c in load_cases(CASES_DIR / f"{kind}.yaml") if c.get("name") == name]
    if not found:
        raise KeyError(f"no case {name!r} in tests/plans/{kind}.yaml")
    return found[0]


# ---- the host a case describes -------------------------------------------------------------------------------
def _tuples(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()}


def build_facts(os_release: str, spec: dict[str, Any]) -> Facts:
    """Facts from an os-release file of tests/data/os-release (its stem, `.txt` optional) and a small dict of what
    differs from a bare host: kernel, gpus, nvidia, pkg, containers, secure_boot, installed_packages, arch."""
    text = (OS_RELEASE_DIR / f"{os_release.removesuffix('.txt')}.txt").read_text()
    os = parse_os_release(text, arch=spec.get("arch", "x86_64"))
    gpus = tuple(PciGpu(**g) for g in spec.get("gpus", []))
    pkg = _tuples(spec.get("pkg", {}))
    pkg["lock_holders"] = tuple(LockHolder(**h) for h in pkg.get("lock_holders", ()))
    nvidia = _tuples(spec.get("nvidia", {}))
    nvidia["dkms"] = tuple(d if isinstance(d, DkmsEntry) else DkmsEntry(**d) for d in nvidia.get("dkms", ()))
    return Facts(
        os=os,
        kernel=KernelInfo(**_tuples(spec.get("kernel", {}))),
        gpus=gpus,
        nvswitch_present=any(g.is_nvswitch for g in gpus),
        nvidia=NvidiaInfo(**nvidia),
        secure_boot=spec.get("secure_boot"),
        pkg=PackageManagerInfo(**pkg),
        containers=ContainerInfo(**_tuples(spec.get("containers", {}))),
        installed_packages=dict(spec.get("installed_packages", {})),
    )


def probe_text(value: str | dict[str, Any] | None) -> str:
    """A probe section as the host printed it. A mapping stands for a file read by remote_file.probe_file:
    {content: "...", mode: "644", owner: root, group: root}; write an absent file as "absent\\n". A content of
    `<scripts/NAME>` is that shipped script's text (a host that has gpunode's script as this version ships it)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    shipped = re.fullmatch(r"<scripts/([\w.-]+)>", str(value["content"]))
    data = (script_text(shipped.group(1)) if shipped else str(value["content"])).encode()
    return (f"present\n{value.get('mode', '644')} {value.get('owner', 'root')} {value.get('group', 'root')}\n"
            f"base64:{base64.b64encode(data).decode()}\n")


def context(case: dict[str, Any], host: str = "case", step: Step | None = None) -> StepContext:
    """The step context a case describes (check mode unless `check: false`); a case with `image:` starts from that
    base's pinned state (its probe is answered once the step says what it asks: `image_probe`). Its probe output
    asks what `step` (by default the case's own step) asks for on these facts, as a real run's does: a section the
    case leaves out printed nothing; one the step did not ask for is a bug in the step (ProbeSectionNotAsked)."""
    facts = facts_of(load_state(case["image"])) if case.get("image") else \
        build_facts(case.get("os", DEFAULT_OS), case.get("facts") or {})
    given = case.get("probe") or {}
    asked = _asked(case, facts, step)
    probe = ProbeOutput({name: probe_text(v) for name, v in given.items() if asked is None or name in asked},
                        asked=given if asked is None else asked, step=case.get("kind", ""))
    return StepContext(Host(name=host, address=host), facts, conn=None,  # type: ignore[arg-type]
                       check=case.get("check", True), probe=probe, state=HostState.of(dict(case.get("shared") or {})))


def _asked(case: dict[str, Any], facts: Facts, step: Step | None) -> set[str] | None:
    """The sections `step` (by default the case's step) asks for on `facts`; None when it refuses its arguments or
    its probe (the case expects that error: then the case's own sections stand for what was asked)."""
    try:
        step = build_step(case["kind"], dict(case.get("args") or {})) if step is None else step
        return set(step.probe(facts) or {})
    except (ValueError, GpunodeError):
        return None


def image_probe(base: str, snippets: dict[str, str], kind: str = "") -> ProbeOutput:
    """What the base's pinned image prints for these probe snippets (its rpm database, its version locks)."""
    state = load_state(base)
    return ProbeOutput({name: answer(state, snippet) for name, snippet in snippets.items()}, asked=snippets,
                       step=kind)


# ---- planning ------------------------------------------------------------------------------------------------
def scripts_elided(command: str) -> str:
    """`command` with each shipped script's quoted text replaced by `<scripts/NAME>`."""
    for path in sorted(SCRIPTS_DIR.glob("*.sh")):
        command = command.replace(q(script_text(path.name)), f"<scripts/{path.name}>")
    return command


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """What the current planner makes of a case: `probe` (the snippets asked), `actions` (summary, command, reason,
    diff, stdin, reboot), `error` ({message, fix} when the plan refuses), target_kernel, reboot_required, notes."""
    result: dict[str, Any] = {"probe": None, "actions": [], "error": None}
    try:
        step = build_step(case["kind"], dict(case.get("args") or {}))
    except ValueError as exc:  # the step's argument checks (types, __post_init__): what `gpunode check` reports
        result["error"] = {"message": str(exc), "fix": argument_fix(case["kind"])}
        return result
    ctx = context(case, step=step)
    try:
        probe = step.probe(ctx.facts)
        if case.get("image"):
            ctx.probe = image_probe(case["image"], probe or {}, case["kind"])
        result["probe"] = {n: scripts_elided(s) for n, s in probe.items()} if probe else None
        actions = step.plan(ctx)
    except GpunodeError as exc:
        result["error"] = {"message": str(exc.cause), "fix": exc.fix}
        return result
    for action in actions:
        stdin = action.stdin.decode("utf-8", "surrogateescape") if isinstance(action.stdin, bytes) else action.stdin
        result["actions"].append({
            "summary": action.summary, "command": scripts_elided(action.command) if action.command else None,
            "reason": action.reason, "diff": render(action.diff, DEFAULT_MAX_DIFF_SIZE) if action.diff else None,
            "stdin": stdin or None, "reboot": action.reboot})
    result.update(target_kernel=ctx.state.target_kernel or None, reboot_required=ctx.reboot_required,
                  notes=list(ctx.notes))
    return result


# ---- checking ------------------------------------------------------------------------------------------------
def problems(case: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What is wrong with a case's shape (whatever the planner does): missing name/says/source, unknown keys, an
    expected action without its reason (or without the diff or command the planner gives it), a probe section the
    step does not ask for."""
    found = [f"unknown key {k!r} (known: {', '.join(sorted(CASE_KEYS))})"
             for k in case if k not in CASE_KEYS | {"kind"}]
    found += [f"no {k!r}" for k in ("name", "says", "source") if not case.get(k)]
    found += _source_problems(case.get("source") or {})
    expect = case.get("expect")
    if not isinstance(expect, dict) or not ({"actions", "error"} & set(expect)):
        return [*found, "expect needs `actions` (a list, [] when converged) or `error`"]
    found += [f"unknown expect key {k!r}" for k in expect if k not in EXPECT_KEYS]
    asked = set(got.get("probe") or {})
    found += [f"probe section {s!r} is not one the step asks for (it asks {sorted(asked)})"
              for s in case.get("probe") or {} if s not in asked]
    for i, want in enumerate(expect.get("actions") or []):
        found += _action_problems(i + 1, want, got["actions"][i] if i < len(got["actions"]) else {})
    return found


def _action_problems(number: int, want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """An expected action's shape against the planned one: its reason, and the diff and command it is given."""
    found = [f"action {number}: unknown key {k!r}" for k in want if k not in ACTION_KEYS]
    if not want.get("reason"):
        found.append(f"action {number}: no `reason`")
    if have.get("diff") and "diff" not in want:
        found.append(f"action {number}: the planner gives a diff: assert it (`diff:`)")
    if have.get("command") and not ({"command", "contains"} & set(want)):
        found.append(f"action {number}: the planner gives a command: assert it (`command:` or `contains:`)")
    return found


def _source_problems(source: dict[str, Any]) -> list[str]:
    if str(source.get("url", "")).startswith("https://"):
        return []
    if not (source.get("repo") and source.get("path") and HEX40.fullmatch(str(source.get("ref", "")))
            and isinstance(source.get("line"), int)):
        return ["source needs repo, path, ref (a 40-hex commit) and line, or an https url"]
    return []


def mismatches(expect: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Where the plan differs from `expect`: each key it names (of `error`, the keys it names); actions in order,
    each on the keys it names (`contains`: parts of the command, in order)."""
    found = [f"{key}: expected {want!r}, planned {got.get(key)!r}"
             for key, want in expect.items() if key != "actions" and not _same(got.get(key), want)]
    if "actions" not in expect:
        return found
    wanted = expect["actions"] or []
    if got["error"] is not None:
        return [*found, f"the plan refused: {got['error']}"]
    if len(wanted) != len(got["actions"]):
        found.append(f"expected {len(wanted)} actions, planned {len(got['actions'])}: "
                     f"{[a['summary'] for a in got['actions']]}")
    for i, (want, have) in enumerate(zip(wanted, got["actions"], strict=False)):
        found += [f"action {i + 1} {key}: expected {value!r}, planned {have.get(key)!r}"
                  for key, value in want.items() if key != "contains" and have.get(key) != value]
        if "contains" in want and not _in_order(have.get("command") or "", want["contains"]):
            found.append(f"action {i + 1}: command lacks {want['contains']!r} in that order: {have.get('command')!r}")
    return found


def _same(got: Any, want: Any) -> bool:
    """Equal; an expected error names only the keys (message, fix) it asserts."""
    if isinstance(want, dict) and isinstance(got, dict):
        return all(got.get(k) == v for k, v in want.items())
    return got == want


def _in_order(text: str, parts: list[str]) -> bool:
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


def shown(got: dict[str, Any]) -> str:
    """The plan as YAML in a case's `expect` shape (empty keys left out), for failure messages."""
    actions = [{k: v for k, v in a.items() if v not in (None, False, "")} for a in got["actions"]]
    plan = {"error": got["error"]} if got["error"] else {
        "actions": actions, **{k: got[k] for k in ("reboot_required", "target_kernel", "notes") if got.get(k)}}
    return yaml.safe_dump(plan, sort_keys=False, width=120, allow_unicode=True)


def tree_lines() -> int:
    """Lines of every file under tests/plans."""
    return sum(len(p.read_text().splitlines()) for p in CASES_DIR.rglob("*") if p.is_file())

