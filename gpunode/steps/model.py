"""The step model: a step's actions, the context it sees on a host, and the Step base class (probe, plan, apply)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gpunode.connection import Connection, ExecResult
from gpunode.errors import GpunodeError
from gpunode.facts.sections import OPTIONAL as OPTIONAL_SECTIONS
from gpunode.inventory import Host
from gpunode.steps.diffs import FileDiff
from gpunode.steps.fixes import action_fix
from gpunode.steps.initramfs_hold import end_hold
from gpunode.steps.initramfs_pause import paused
from gpunode.steps.pkgmgr import LISTS_FRESH_ENV, AptManager, without_refresh
from gpunode.steps.probe import ProbeOutput, Snippets
from gpunode.steps.state import HostState

if TYPE_CHECKING:
    from gpunode.facts import Facts


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
    initramfs_once: bool = False  # a deb install: initramfs generations held back, one after it (initramfs_pause.py)


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
            self.state.apt_lists_refreshed = False

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

    @property
    def lists_stale(self) -> bool:
        """An apt install must refresh the lists first: this run has not refreshed them, or a source changed since
        (a step that adds a repository in its own command refreshes after it whatever this says)."""
        return not self.state.apt_lists_refreshed or self.state.package_sources_changed

    def command_for(self, action: Action) -> str:
        """The action's command to run now; an install's package files put in place first by the package share;
        no second refresh of the apt lists in one run (one `apt-get update` per host, unless a package source
        changed since); a deb install with its initramfs generations held back, the hold ended by the first other
        command that is not a file gpunode writes (steps/initramfs_pause.py)."""
        command = self.package_share(self, action) if action.installs and self.package_share else \
            action.command or ""
        if not self.lists_stale:
            command = without_refresh(command)
            command = f"{LISTS_FRESH_ENV} {command}" if action.refreshes and command else command
        if not command:
            return command
        if action.initramfs_once:
            self.state.initramfs_held = not self.check
            return paused(command)
        if self.state.initramfs_held and not action.writes:  # gpunode's own file writes run no update-initramfs
            end_hold(self.conn, self.state)
        return command

    def run(self, command: str, **kwargs: Any) -> ExecResult:
        kwargs.setdefault("on_output", self.on_output)
        result = self.conn.run(command, **kwargs)
        self.results.append(result)
        if result.ok and AptManager.update() in command:
            self.state.apt_lists_refreshed = True
        return result


SYSTEMD_DIRS = ("/etc/systemd/system/", "/run/systemd/system/", "/lib/systemd/system/", "/usr/lib/systemd/system/",
                "/usr/local/lib/systemd/system/")
UNIT_SUFFIXES = (".service", ".socket", ".timer", ".mount", ".automount", ".path", ".target", ".slice", ".swap")
PACKAGE_SOURCE_PATHS = ("/etc/apt/sources.list", "/etc/apt/trusted.gpg", "/etc/apt/keyrings/",
                        "/usr/share/keyrings/", "/etc/yum.repos.d/", "/etc/dnf/")


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
    # a change it makes disturbs the GPUs' running work (the driver or module replaced, MIG re-partitioned): in a
    # rolling run with `drain: auto` the host leaves its scheduler first (runner/rolling.py). A reboot always does.
    disturbs_gpus: ClassVar[bool] = False

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
                    fix=action_fix(action, result),
                )
            if action.writes:
                ctx.wrote(action.writes)
            self.after_action(ctx, action, result)

    def after_action(self, ctx: StepContext, action: Action, result: ExecResult) -> None:
        """Hook for steps that learn something from an action's output."""


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
