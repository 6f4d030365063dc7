"""The step model: probe (batched), plan from facts and probe output, apply the planned actions."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from gpunode.connection import Connection, ExecResult
from gpunode.errors import GpunodeError, disk_full_fix
from gpunode.facts.sections import OPTIONAL as OPTIONAL_SECTIONS
from gpunode.inventory import Host
from gpunode.steps.diffs import FileDiff
from gpunode.steps.probe import ProbeOutput, Snippets
from gpunode.steps.registry import StepDeclarationError, declared
from gpunode.steps.state import HostState
from gpunode.values import as_bool, file_mode, kind_of

if TYPE_CHECKING:
    from gpunode.facts import Facts


class Mode(str):
    """A step argument holding a permission mode: normalised to octal digits by `coerce` (see values.file_mode)."""


@dataclass
class Action:
    """One change a step will make, with a human reason; `command` runs as root on the host."""

    summary: str
    reason: str = ""
    command: str | None = None
    stdin: str | bytes = b""
    diff: str | FileDiff | None = None  # capped when shown (steps/diffs.py)
    timeout: float | None = None
    changes: bool = True          # False for waits and checks that alter nothing
    reboot: bool = False          # the runner performs reboots (reconnect, boot-id check)
    fix: str = ""                 # what to tell the user if this action fails
    writes: str = ""              # the file this action creates, changes or removes (see StepContext.wrote)
    installs: tuple[str, ...] = ()  # apt package specs this action installs: the package share fetches them first
    recommends: bool = False      # ... with their recommended packages
    refreshes: bool = False       # the command refreshes the package lists itself (the share refreshes them first)


@dataclass
class StepContext:
    """What a step sees on one host."""

    host: Host
    facts: Facts
    conn: Connection
    check: bool
    probe: ProbeOutput = field(default_factory=ProbeOutput)  # what this step's probe printed, per section
    state: HostState = field(default_factory=HostState)   # what earlier steps on this host told later ones
    notes: list[str] = field(default_factory=list)
    on_output: Callable[[str], None] | None = None          # each output line of a running command (-v, live view)
    results: list[ExecResult] = field(default_factory=list)  # what each command run through `run` returned (register)
    # the package share (steps/package_share.py): fetches an install's files first, returns the command left to run
    package_share: Callable[[StepContext, Action], str] | None = None

    def wrote(self, path: str) -> None:
        """Record a file changed in this run; what later steps must do about it is decided here, once.

        A systemd unit or drop-in -> `daemon_reload_pending` (the `service` step reloads before it acts);
        a package source or keyring -> `package_sources_changed` (the `packages` step refreshes the lists).
        """
        drop_in = ".d/" in path and path.endswith(".conf")
        if path.startswith(SYSTEMD_DIRS) and (path.endswith(UNIT_SUFFIXES) or drop_in):
            self.state.daemon_reload_pending = True
        if path.startswith(PACKAGE_SOURCE_PATHS):
            self.state.package_sources_changed = True

    def will_install(self, names: Iterable[str]) -> None:
        """Check mode: these packages would be installed by this step, so later steps can plan for them."""
        if self.check:
            self.state.installing += [n for n in names if n not in self.state.installing]

    def require_reboot(self, reason: str) -> None:
        """Ask for a reboot (done by a later `reboot` step) and say why."""
        self.state.reboot_required = True
        if reason not in self.state.reboot_reasons:
            self.state.reboot_reasons.append(reason)

    @property
    def reboot_required(self) -> bool:
        return self.state.reboot_required

    @property
    def target_kernel(self) -> str:
        """The kernel that modules must be built for: the one a kernel step of this run chose (the next boot's when
        it installed one); without one (`--tags driver`), the running kernel when its headers are there, else the
        newest installed kernel with headers, whose boot is pending (Debian's dkms postinst builds for that one too:
        dell/dkms dkms_common.postinst, get_newest_kernel; Debian 12's /usr/lib/dkms/common.postinst)."""
        kernel = self.facts.kernel
        if self.state.target_kernel:
            return self.state.target_kernel
        if kernel.running_headers_present:
            return kernel.running
        return kernel.pending or kernel.running

    def command_for(self, action: Action) -> str:
        """The action's command to run now; an install's package files put in place first by the package share."""
        if action.installs and self.package_share:
            return self.package_share(self, action)
        return action.command or ""

    def run(self, command: str, **kwargs: Any) -> ExecResult:
        kwargs.setdefault("on_output", self.on_output)
        result = self.conn.run(command, **kwargs)
        self.results.append(result)
        return result


SYSTEMD_DIRS = ("/etc/systemd/system/", "/run/systemd/system/", "/lib/systemd/system/", "/usr/lib/systemd/system/",
                "/usr/local/lib/systemd/system/")
UNIT_SUFFIXES = (".service", ".socket", ".timer", ".mount", ".automount", ".path", ".target", ".slice", ".swap")
PACKAGE_SOURCE_PATHS = ("/etc/apt/sources.list", "/etc/apt/trusted.gpg", "/etc/apt/keyrings/",
                        "/usr/share/keyrings/", "/etc/yum.repos.d/", "/etc/dnf/")
def failure_fix(output: str, writing: str = "") -> str:
    """A fix that the output itself points at (a full disk, where `writing` is the file written), whatever the
    command was; "" when none."""
    return disk_full_fix(output, writing)


class StepFailed(GpunodeError):
    """A step could not do its work on a host."""


class ArgumentError(ValueError):
    """A step argument is wrong; `arg` names it (None when the problem is not one argument's)."""

    def __init__(self, message: str, arg: str | None = None) -> None:
        super().__init__(message)
        self.arg = arg


class Step:
    """Base class: subclasses are dataclasses whose fields are the step's validated arguments."""

    kind: ClassVar[str] = ""
    # the facts sections (besides core) that probe/plan/apply read: gathered with the lock, before the step runs
    # (gpunode/facts/sections.py). Reading another one costs a round trip, never a wrong answer.
    facts_sections: ClassVar[frozenset[str]] = frozenset(OPTIONAL_SECTIONS)
    # its changes are made as root (packages, units, /etc): without root and without become it cannot work
    needs_root: ClassVar[bool] = True

    def probe(self, facts: Facts) -> Snippets | None:
        """Named shell snippets (run as root, batched with the other steps' probes, see steps/probe.py); `plan`
        reads what each printed as `ctx.probe[name]`."""
        return None

    def plan(self, ctx: StepContext) -> list[Action]:
        """The actions needed to converge (empty when nothing needs to change)."""
        raise NotImplementedError

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        """Carry out the planned actions; stop at the first that fails."""
        for action in actions:
            if action.command is None or action.reboot:
                continue
            result = ctx.run(ctx.command_for(action), stdin=action.stdin, timeout=action.timeout, label=action.summary)
            if not result.ok:
                raise StepFailed(
                    f"{action.summary} failed (exit {result.exit_code}):\n{_indent(result.tail())}",
                    fix=_fix(action, result),
                )
            if action.writes:
                ctx.wrote(action.writes)
            self.after_action(ctx, action, result)

    def after_action(self, ctx: StepContext, action: Action, result: ExecResult) -> None:
        """Hook for steps that learn something from an action's output."""


# ---- registry and argument validation ---------------------------------------------------------------
# A step kind is declared once: the `kind` class attribute of its class, in its module under gpunode/steps/
# (found by reading the source: steps/registry.py). Its module is imported when a playbook first uses it.


class StepTypes(Mapping[str, "type[Step]"]):
    """kind -> step class; a kind's module is imported on first lookup (iterating imports them all)."""

    def __init__(self) -> None:
        self._classes: dict[str, type[Step]] = {}

    def register(self, cls: type[Step]) -> None:
        if dataclasses.is_dataclass(cls) and "kind" in {f.name for f in dataclasses.fields(cls)}:
            raise StepDeclarationError(
                f"{cls.__module__}.{cls.__qualname__}: `kind` is annotated as a dataclass field, so it would be a "
                "step argument", fix=f'write `kind = "{cls.kind}"` (or `kind: ClassVar[str] = "{cls.kind}"`)')
        if not isinstance(cls.kind, str) or not cls.kind:
            raise StepDeclarationError(f"{cls.__module__}.{cls.__qualname__} has no `kind`",
                                       fix='give the class `kind = "my_step"`')
        if not dataclasses.is_dataclass(cls):
            raise StepDeclarationError(f"{cls.__module__}.{cls.__qualname__} is not a dataclass (its fields are the "
                                       "step's arguments)", fix="put @dataclass under @register")
        builtin = declared().get(cls.kind)
        if builtin and builtin.module != cls.__module__:
            raise StepDeclarationError(f"step kind {cls.kind!r} is a built-in step ({builtin.where}); "
                                       f"{cls.__module__}.{cls.__qualname__} cannot take it",
                                       fix="give the class another `kind`")
        first = self._classes.get(cls.kind)
        if first and (first.__module__, first.__qualname__) != (cls.__module__, cls.__qualname__):
            raise StepDeclarationError(f"step kind {cls.kind!r} is registered twice: {first.__module__}."
                                       f"{first.__qualname__} and {cls.__module__}.{cls.__qualname__}",
                                       fix="give one of the two step classes another `kind`")
        self._classes[cls.kind] = cls

    def registered(self, kind: str) -> type[Step] | None:
        """The class registered under `kind` so far (no import); None when none is."""
        return self._classes.get(kind)

    def __getitem__(self, kind: str) -> type[Step]:
        declaration = declared().get(kind)
        if kind not in self._classes and declaration:
            importlib.import_module(declaration.module)
            if kind not in self._classes:
                raise StepDeclarationError(
                    f"{declaration.where} declares step kind {kind!r} but its class is not registered",
                    fix="decorate the step class with @register (from gpunode.steps.base)")
        return self._classes[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in declared() or kind in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(declared()), **dict.fromkeys(self._classes)})

    def __len__(self) -> int:
        return len(set(declared()) | set(self._classes))


STEP_TYPES = StepTypes()


def register(cls: type[Step]) -> type[Step]:
    """Class decorator: make the step available to playbooks under `cls.kind`."""
    STEP_TYPES.register(cls)
    return cls


def step_facts_sections(kinds: Iterable[str]) -> frozenset[str]:
    """The facts sections the steps of these kinds read (unknown kinds: all)."""
    wanted: set[str] = set()
    for kind in kinds:
        cls = STEP_TYPES.get(kind)
        wanted |= cls.facts_sections if cls else frozenset(OPTIONAL_SECTIONS)
    return frozenset(wanted)


@functools.cache
def _type_hints(cls: type[Step]) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def argument_fix(kind: str) -> str:
    """What to tell a user whose arguments a step refused (build_step raised ArgumentError / ValueError)."""
    return f"see `gpunode steps --show {kind}` (docs/steps.md)"


def build_step(kind: str, args: dict[str, Any]) -> Step:
    """Validate arguments against the step's dataclass fields and build it; raises ValueError with the reason."""
    cls = STEP_TYPES[kind]
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name in args:
        if name not in fields:
            raise ArgumentError(f"unknown argument {name!r} for {kind}; known: {', '.join(fields)}", name)
    missing = [n for n, f in fields.items() if n not in args and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ArgumentError(f"{kind} needs argument(s): {', '.join(missing)}")
    values = {}
    for name, value in args.items():
        try:
            values[name] = coerce(value, hints[name], f"{kind}.{name}")
        except ValueError as exc:
            raise ArgumentError(str(exc), name) from None
    return cls(**values)  # __post_init__ checks what types cannot


def arg(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Callable[[], Any] | None = None) -> Any:
    """A step argument with its doc (docs/steps.md is generated from it): `timeout: int = arg(600, "seconds")`;
    without a default the argument is required; `factory` for a mutable default (`arg(factory=list, doc=...)`)."""
    metadata = {"doc": doc}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def arg_doc(f: dataclasses.Field) -> str:
    """The doc an argument was declared with (`arg(..., doc)`); "" when none."""
    return str(f.metadata.get("doc", ""))


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check (and gently coerce: "5" -> 5, a string -> [string]) a value against a type hint."""
    if hint is Any:
        return value
    check = _BY_ORIGIN.get(typing.get_origin(hint)) or _BY_TYPE.get(hint)
    return check(value, hint, where) if check else value  # another type: taken as it is


def _coerce_union(value: Any, hint: Any, where: str) -> Any:
    options = typing.get_args(hint)
    if value is None and type(None) in options:
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return coerce(value, option, where)
        except ValueError as exc:
            errors.append(str(exc))
    raise ValueError(errors[0] if errors else f"{where}: bad value {value!r}")


def _coerce_literal(value: Any, hint: Any, where: str) -> Any:
    allowed = typing.get_args(hint)
    if isinstance(value, bool) and ("yes" if value else "no") in allowed:
        return "yes" if value else "no"  # YAML reads an unquoted `containerd: yes` as true
    if value not in allowed:
        raise ValueError(f"{where} must be one of {', '.join(map(str, allowed))}, got {value!r}")
    return value


def _coerce_list(value: Any, hint: Any, where: str) -> Any:
    (item,) = typing.get_args(hint) or (Any,)
    if isinstance(value, str):
        value = [value]  # one name: a list of one (a bare number is a typo: `names: 5`)
    if not isinstance(value, list | tuple):
        shown = f" {value!r}" if isinstance(value, int | float) else ""
        raise ValueError(f"{where} must be a list, got a {kind_of(value)}{shown}")
    return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]


def _coerce_dict(value: Any, hint: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a mapping, got a {kind_of(value)}")
    return dict(value)


def _coerce_bool(value: Any, hint: Any, where: str) -> Any:
    flag = as_bool(value)
    if flag is None:
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return flag


def _coerce_mode(value: Any, hint: Any, where: str) -> Any:
    return Mode(file_mode(value, where))


def _coerce_number(value: Any, hint: Any, where: str) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{where} must be a number, got {value!r}")
    try:
        return hint(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a number, got {value!r}") from None


def _coerce_str(value: Any, hint: Any, where: str) -> Any:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{where} must be a string, got a {kind_of(value)}")


_Coerce = Callable[[Any, Any, str], Any]
_BY_ORIGIN: dict[Any, _Coerce] = {typing.Union: _coerce_union, types.UnionType: _coerce_union,
                                  Literal: _coerce_literal, list: _coerce_list, dict: _coerce_dict}
_BY_TYPE: dict[Any, _Coerce] = {bool: _coerce_bool, Mode: _coerce_mode, int: _coerce_number,
                                float: _coerce_number, str: _coerce_str}


def killed_fix(exit_code: int | None) -> str:
    """A fix for a command killed by a signal (a shell's exit 128 + N); "" for an ordinary failure."""
    if exit_code is None or not 128 < exit_code <= 128 + 64:
        return ""
    signal = exit_code - 128
    if signal == 9:
        return ("the command was killed (exit 137: SIGKILL), most often by the kernel's out-of-memory killer (on the "
                "host: `journalctl -k | grep -i 'out of memory'`) or by a person or a watchdog; free memory or give "
                "the host more, then run again (an interrupted dpkg is repaired by the next run)")
    name = {15: "SIGTERM (a shutdown, systemd or a person stopped it)", 2: "SIGINT", 1: "SIGHUP"}.get(signal, "")
    return (f"the command was killed by signal {signal}{' = ' + name if name else ''} (exit {exit_code}), not a "
            "failure of its own; find what stopped it (the host's journal), then run again")


# the shell's own words for a program it cannot find: dash `sh: 1: gpg: not found`, bash `bash: line 1: gpg: command
# not found` or `bash: gpg: command not found`
_NOT_FOUND = re.compile(r"^(?:/bin/|/usr/bin/)?(?:ba|da)?sh: (?:line )?(?:\d+: )?([^\s:]+): (?:command )?not found\s*$",
                        re.MULTILINE)


def missing_program_fix(output: str) -> str:
    """A fix for a command that failed because the shell found no such program; "" otherwise."""
    names = list(dict.fromkeys(_NOT_FOUND.findall(output)))
    if not names:
        return ""
    return (f"the host has no {', '.join(names)}: the shell found no such program; install the package "
            "that provides it first (a `packages` step before this one, or the built-in `base` playbook)")


def _fix(action: Action, result: ExecResult) -> str:
    """What to tell the user: a kill by a signal (OOM), a program the host lacks or what the output points at (a
    full disk) first; for a file write, that the old file was kept; else the action's own fix."""
    output = result.stdout + result.stderr
    pointed = killed_fix(result.exit_code) or missing_program_fix(output) or failure_fix(output, action.writes)
    if pointed:
        return f"{pointed}; {action.fix}" if action.writes and action.fix else pointed
    return action.fix or "read the output above and the host's log; fix the cause and run again"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
