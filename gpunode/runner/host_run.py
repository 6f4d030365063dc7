"""One host through a playbook: lock + facts, render, batched probe, plan, apply, handlers, release."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpunode.connection import Connection, ExecResult
from gpunode.errors import ConnectError, GpunodeError
from gpunode.facts import Facts, parse_facts
from gpunode.facts.sections import CORE as CORE_FACTS
from gpunode.facts.sections import sections_read_by
from gpunode.inventory import Host
from gpunode.playbook import Playbook, StepSpec, TemplateError, evaluate, render, resolve_variables
from gpunode.report.model import HostOutcome, StepOutcome
from gpunode.report.phases import generation_line, phase_line, phase_times
from gpunode.runner import facts_cache, remote_lock, task_keys
from gpunode.runner.events import Events
from gpunode.runner.host_rules import account_commands, predicted, require_root
from gpunode.runner.host_state import BeforeDisturbing, Carried, Handlers, PackageShare, Session, Share
from gpunode.steps import Action, Step, StepContext, build_step, step_facts_sections
from gpunode.steps.diffs import DEFAULT_MAX_DIFF_SIZE
from gpunode.steps.diffs import render as render_diff
from gpunode.steps.initramfs_hold import end_hold
from gpunode.steps.package_share import share_for
from gpunode.steps.probe import ProbeBatch, ProbeOutput, Snippets
from gpunode.templates_read import names_in_order, names_read

# Arguments of a sensitive step that stay visible (where and how, not what).
VISIBLE_ARGS = {"path", "dest", "owner", "group", "mode", "state", "create", "backup", "timeout", "name"}


LEFTOVER_FIX = ("the package manager still runs on the host and is never killed mid-way (see 'still running' below); "
                "run again: a new run waits for it to end, then goes on (every step is idempotent)")

class Cancelled(GpunodeError):
    """The user interrupted the run."""


@dataclass
class PlannedStep:
    spec: StepSpec
    step: Step | None          # None when `when:` is false
    probe: Snippets | None = None
    probe_output: ProbeOutput = field(default_factory=ProbeOutput)  # until probed: asked nothing
    deferred: bool = False     # reads a registered result: rendered when its turn comes, not at the start

    def __post_init__(self) -> None:
        self.probe_output.step = self.spec.kind  # named when the step reads a section it did not ask for


@dataclass
class HostRun:
    """Runs `playbook` on `host` through `conn`. Never raises: the outcome says what happened. What it keeps while
    it goes is in small objects of runner/host_state.py: `session`, `carried`, `handlers`, `share`."""

    host: Host
    conn: Connection
    playbook: Playbook
    extra_vars: dict[str, Any]
    check: bool
    events: Events
    cancel: threading.Event
    outcome: HostOutcome = field(init=False)
    opening: Future[None] | None = None  # the connection already opening (runner/early.py), or None: open it here
    max_diff_size: int = DEFAULT_MAX_DIFF_SIZE  # bytes of diff per step in reports (--max-diff-size)
    before_disturbing: BeforeDisturbing | None = None  # a rolling run's drain (runner/rolling.py)

    def __post_init__(self) -> None:
        self.outcome = HostOutcome(host=self.host.name, address=self.host.address,
                                   log_path=str(self.conn.transcript.log_path or ""))
        self.session = Session()    # the lock (its session runs the probes), the guessed probe, the facts
        self.carried = Carried(frozenset(s.register for s in self.playbook.steps if s.register))  # for later steps
        self.handlers = Handlers()  # notified by changed steps, in order; those that ran
        self.share = PackageShare()  # the package share, read from the variables once per host run

    # ---- top level -------------------------------------------------------------------------------
    def run(self) -> HostOutcome:
        started = time.monotonic()
        self.events.host_started(self.host.name, self.outcome.log_path)
        try:
            with self._phase("connect"):
                if self.opening is not None:
                    self.opening.result()  # raises what opening raised (ConnectError...)
                else:
                    self.conn.open()
            with self._phase("lock + facts"):
                cached = facts_cache.load(self.host)
                guess = self.session.guess = self._guess_probe(cached)
                lock = self.session.lock = remote_lock.acquire(
                    self.conn, then=(guess.nonce, guess.script()) if guess else None,
                    sections=self._facts_sections(), on_wait=lambda text: self.events.notice(self.host.name, text))
            self._run_steps(lock.facts)
        except ConnectError as exc:
            self._fail(exc, "unreachable" if not self.outcome.steps else "failed")
        except Cancelled as exc:
            self._fail(exc, "cancelled")
        except GpunodeError as exc:
            self._fail(exc, "failed")
            self._handlers_after_failure()
        except Exception as exc:  # noqa: BLE001 - one host's bug must never stop the others
            self._fail(GpunodeError(f"internal error: {type(exc).__name__}: {exc}",
                                    fix="please report this with the host log"), "failed")
        finally:
            self._end_initramfs_hold()
            pending = self.handlers.pending()
            if pending and not self.check:
                self.outcome.notes.append(f"handlers notified but not run: {', '.join(pending)}")
            self.conn.activity = "release"
            if self.session.lock:  # with the sections the steps read (gathered on the way): the next run asks for
                facts_cache.save(self.host, self.session.lock.facts.raw)  # them at once
            with self._phase("release"):
                if self.session.lock:
                    self._release(self.session.lock)
                self.conn.close()
            account_commands(self.outcome, self.conn)
            self.outcome.seconds = time.monotonic() - started
            self.conn.transcript.note("timings: " + ", ".join(f"{k} {v:.3f}s" for k, v in self.outcome.phases.items()))
            self._phase_times()
            self.conn.transcript.note(f"finished: {self.outcome.status} after {self.outcome.exec_count} remote execs")
            self.conn.transcript.close()
        if self.outcome.status == "ok" and self.outcome.changed:
            self.outcome.status = "would-change" if self.check else "changed"
        self.events.host_finished(self.outcome)
        return self.outcome

    def _end_initramfs_hold(self) -> None:
        """The initramfs pause the run's installs hold, ended (steps/initramfs_hold.py); a failure here fails the
        host unless it failed already."""
        try:
            end_hold(self.conn, self.carried.host)
        except ConnectError:  # the host is gone: its next run ends the pause (steps/initramfs_left.py)
            pass
        except GpunodeError as exc:
            if self.outcome.status == "ok":
                self._fail(exc, "failed")
            else:
                self.outcome.notes.append(f"{exc} (fix: {exc.fix})")

    def _phase_times(self) -> None:
        """Time to ready by phase, and each initramfs generation and DKMS build, in the report and the log."""
        transcript = self.conn.transcript
        records = transcript.records
        self.outcome.phase_times = phase_times(self.outcome.steps, records, transcript.marks.done, self.outcome.phases)
        self.outcome.timed = [m.to_dict(transcript.redact(records[m.command].label) if 0 <= m.command < len(records)
                                        else "") for m in transcript.marks.done]
        for mark in self.outcome.timed:
            transcript.note(generation_line(mark))
        transcript.note(f"phases: {phase_line(self.outcome.phase_times)}")

    def _release(self, lock: remote_lock.RunLock) -> None:
        """Let go of the host's lock; say what of this run still runs there (a package transaction, never killed)."""
        # only the lock's own session ran: nothing of this run can be left running
        lock.release(leftovers_possible=self.conn.transcript.exec_count > 1)
        if lock.still_running:
            self.outcome.notes.append(
                f"still running on the host (a package transaction is never killed; the host's lock "
                f"is held until it ends): {lock.still_running}")
            if self.outcome.status == "cancelled":
                self.outcome.fix = LEFTOVER_FIX

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time one phase of the host's run (summed when it recurs: probes, steps) for the log and the report."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.outcome.phases[name] = round(self.outcome.phases.get(name, 0.0) + time.monotonic() - started, 4)

    def _fail(self, exc: GpunodeError, status: str) -> None:
        if self.cancel.is_set():  # the connection was closed under us on purpose
            status = "cancelled"
            exc = Cancelled(f"interrupted by the user (Ctrl-C){' during ' + exc.step if exc.step else ''}",
                            fix="run again: every step is idempotent; files were written atomically or not at all",
                            step=exc.step)
        self.outcome.status = status  # type: ignore[assignment]
        self.outcome.error = self.conn.transcript.redact(exc.cause)
        self.outcome.fix = exc.fix
        self.outcome.failed_step = exc.step or self.outcome.failed_step
        self.conn.transcript.note(f"FAILED ({status}): {exc}")

    # ---- steps -----------------------------------------------------------------------------------
    def _variables(self, facts: Facts, scope: dict[str, Any] | None = None) -> dict[str, Any]:
        """Playbook vars (and an included step's scope) are defaults; inventory vars override them; --var both."""
        return resolve_variables({**self.playbook.vars, **(scope or {}), **self.host.vars, **self.carried.registered,
                                  **self.extra_vars, "facts": facts, "inventory_hostname": self.host.name,
                                  "check_mode": self.check})

    def _package_share(self, facts: Facts) -> Share | None:
        """The package share the `package_cache` variable asks for (read once per host run)."""
        return self.share.once(lambda: share_for(self._variables(facts).get("package_cache")))

    def _plan_step(self, spec: StepSpec, facts: Facts) -> PlannedStep:
        """The step as these facts make it (`when:` evaluated, arguments rendered) with its probe."""
        variables = self._variables(facts, spec.vars)
        if spec.when is not None and not evaluate(str(spec.when), variables):
            return PlannedStep(spec, None)
        step = build_step(spec.kind, render(spec.args, variables))
        return PlannedStep(spec, step, step.probe(facts))

    def _defers(self, spec: StepSpec) -> bool:
        """Whether the step's `when:` or arguments read a registered result (known only once that step ran)."""
        return self.carried.defers(_reads(spec))

    def _check_for(self, spec: StepSpec) -> bool:
        """Whether this step only predicts: --check, unless the step says `check_mode: false` (a read-only query
        that runs in --check too, as in Ansible); `check_mode: true` predicts in a real run too."""
        return spec.check_mode if spec.check_mode is not None else self.check

    def _unknown_inputs(self, spec: StepSpec) -> list[str]:
        """--check: the registered results this step reads that come from steps that would run (so are unknown)."""
        return self.carried.unknown_among(_reads(spec))

    def _prepare(self, specs: list[StepSpec], facts: Facts, now: bool = False) -> list[PlannedStep]:
        planned = []
        for spec in specs:
            if not now and self._defers(spec):
                planned.append(PlannedStep(spec, None, deferred=True))
                continue
            try:
                planned.append(self._plan_step(spec, facts))
            except (TemplateError, ValueError) as exc:
                self.outcome.failed_step = spec.name
                exc = _name_the_variable(exc, spec)
                failed = StepOutcome(spec.name, spec.kind, "failed", message=f"{spec.where}: {exc}", where=spec.where)
                self._finish(failed, time.monotonic(), facts)  # a failed step in every report, not a host error
                raise GpunodeError(f"{spec.where}: {exc}", step=spec.name,
                                   fix="fix the playbook or the variable it uses") from None
        return planned

    def _facts_sections(self) -> frozenset[str]:
        """The facts sections to gather, all at the start (one snapshot, as Ansible's): those the playbook's steps
        declare and those its templates and `when:`s read (handlers', variables' and included steps' too)."""
        specs = [*self.playbook.steps, *self.playbook.handlers.values()]
        templates = sections_read_by([self.playbook.vars, self.host.vars, self.extra_vars,
                                      *(s.args for s in specs), *(s.vars for s in specs)],
                                     [s.when for s in specs if s.when is not None]
                                     + [c for s in specs for c in (s.failed_when or []) + (s.changed_when or [])])
        return step_facts_sections(spec.kind for spec in specs) | templates | {CORE_FACTS}

    def _guess_probe(self, cached: str | None) -> ProbeBatch | None:
        """The probe as the facts of this host's last run make it: sent with the lock + facts script, it saves a
        round trip whenever the fresh facts make the same probe (checked in `_probe`). None when there is no guess."""
        if not cached or any(_user_command_from_facts(spec) for spec in self.playbook.steps):
            return None
        try:
            facts = parse_facts(cached)
            planned = [self._plan_step(spec, facts) for spec in self.playbook.steps if not self._defers(spec)]
        except Exception:  # noqa: BLE001 - an old or odd cache is no guess, never an error
            return None
        probes = [p.probe for p in planned if p.step is not None and p.probe]
        return ProbeBatch(probes) if probes else None

    def _run_steps(self, facts: Facts) -> None:
        self.session.facts = facts
        with self._phase("render"):
            planned = self._prepare(self.playbook.steps, facts)
        with self._phase("probe"):
            self._probe(planned)
        with self._phase("steps"):
            for item in planned:
                facts = self.session.facts = self._run_one(item, facts)
                if self.outcome.steps[-1].status in ("changed", "would-change"):
                    self.handlers.notify(item.spec.notify)
        if self.handlers.notified and self.check:
            self.outcome.notes.append(f"handlers that would run: {', '.join(self.handlers.notified)}")
        elif self.handlers.notified:
            with self._phase("handlers"):
                self._run_handlers(facts)

    def _run_handlers(self, facts: Facts) -> None:
        """Run the notified handlers once each, in the order they were notified."""
        for name in self.handlers.pending():
            (item,) = self._prepare([self.playbook.handlers[name]], facts)  # one by one: a broken one stops only
            if not self.carried.changed_something:                           # itself and those after it
                self._probe([item])  # (after a change, _run_one probes it afresh anyway)
            self.handlers.ran.add(name)
            facts = self.session.facts = self._run_one(item, facts)

    def _handlers_after_failure(self) -> None:
        """Like Ansible's --force-handlers: a step failed, but the changes already made still get their handlers."""
        if self.check or self.cancel.is_set() or self.session.facts is None or not self.handlers.notified:
            return
        error, fix, failed_step = self.outcome.error, self.outcome.fix, self.outcome.failed_step
        try:
            self._run_handlers(self.session.facts)
        except GpunodeError as exc:
            self.outcome.notes.append(f"handler {exc.step or '?'} failed too: {self.conn.transcript.redact(exc.cause)}")
        except Exception as exc:  # noqa: BLE001 - the host already failed; its report must still be written
            self.outcome.notes.append(f"handlers not run: {type(exc).__name__}: {exc}")
        finally:  # the host's failure stays the step that failed first
            self.outcome.error, self.outcome.fix, self.outcome.failed_step = error, fix, failed_step

    def _probe(self, planned: list[PlannedStep]) -> None:
        """All probes in one exec, each output split back to its step."""
        self.conn.activity = "probe"
        todo = [p for p in planned if p.step is not None and p.probe]
        guess, lock = self.session.take_guess(), self.session.lock
        if guess and guess.probes == [p.probe for p in todo] and lock:
            label = f"probe of {_steps(len(todo))}, sent with the lock script"
            batch, result = guess, lock.result(guess.nonce, label)
        else:
            if guess and lock:  # the facts changed since the last run: that probe's answer is not this one's
                lock.result(guess.nonce, "probe guessed from the last run's facts (discarded: facts changed)")
            if not todo:
                return
            batch = ProbeBatch([p.probe or {} for p in todo])
            result = self._run_probe(batch.script(), f"probe of {_steps(len(todo))}")
        if not result.ok:
            raise GpunodeError(f"probing the host failed (exit {result.exit_code}): {result.tail()}",
                               step="probe", fix="see the host log")
        for item, output in zip(todo, batch.split(result.stdout, [p.spec.kind for p in todo]), strict=True):
            item.probe_output = output

    def _run_probe(self, script: str, label: str) -> ExecResult:
        """A probe script runs in the lock's session (no remote command of its own) while the lock is held."""
        lock = self.session.lock
        return lock.run(script, label) if lock else self.conn.run("sh -s", stdin=script, label=label)

    def _run_one(self, item: PlannedStep, facts: Facts) -> Facts:
        spec = item.spec
        if self.cancel.is_set():
            raise Cancelled("cancelled by the user before this step", step=spec.name)
        self.events.step_started(self.host.name, spec.name)
        self.conn.activity = spec.name
        self.conn.sensitive = spec.sensitive
        fresh = item.deferred  # rendered now, with the results registered so far; probed in the lock's session
        unknown = self._unknown_inputs(spec) if fresh else []
        if fresh and not unknown:
            (item,) = self._prepare([spec], facts, now=True)
        if spec.sensitive and item.step is not None:
            self._hide_values(item.step)
        started = time.monotonic()
        outcome = StepOutcome(spec.name, spec.kind, "ok", where=spec.where)
        self.conn.transcript.note(f"step {spec.name} ({spec.kind}) at {spec.where}")
        if unknown:  # --check: it reads what a step that would run printed; nobody knows that yet
            outcome.status = "would-change"
            outcome.message = (f"would change (unknown until run): reads {', '.join(unknown)}, the result of a step "
                               "that --check does not run")
            return self._settle(item, outcome, [], None, started, facts)
        if item.step is None:
            outcome.status, outcome.message = "skipped", f"when: {spec.when} is false"
            return self._settle(item, outcome, [], None, started, facts)
        if (self.carried.changed_something or fresh) and item.probe:
            self._probe([item])  # an earlier change may have altered what this step sees
            self.conn.activity = spec.name  # its commands are the step's again (the host's guard, phase times)
        ctx = StepContext(self.host, facts, self.conn, self._check_for(spec), item.probe_output, self.carried.host,
                          # -v shows each output line: a secret (a sensitive step's registered output) masked
                          on_output=lambda line: self.events.output(self.host.name,
                                                                    self.conn.transcript.redact(line)),
                          package_share=self._package_share(facts))
        error: GpunodeError | None = None
        try:
            facts = self._plan_and_apply(item.step, ctx, outcome, facts, spec.disturbs_gpus)
        except GpunodeError as exc:
            outcome.status = "cancelled" if self.cancel.is_set() else "failed"  # Ctrl-C closed its connection
            error = exc
            if spec.sensitive:  # its output could hold what the step keeps secret
                exc.cause = exc.cause.splitlines()[0] + " (output hidden: sensitive step)"
            outcome.message = str(exc.cause)
            if not spec.sensitive:  # what the step noted before it failed (the package share's account, a refused
                self.outcome.notes += ctx.notes  # cache entry): the cause may lie there
        return self._settle(item, outcome, ctx.results, error, started, facts)

    def _plan_and_apply(self, step: Step, ctx: StepContext, outcome: StepOutcome, facts: Facts,
                        disturbs: bool | None = None) -> Facts:
        """Plan the step and (unless checking) apply what it planned; the outcome says what happened. `disturbs`:
        the playbook's `disturbs_gpus:` for this step (None: as its kind says)."""
        actions = step.plan(ctx)
        outcome.actions = [{"summary": a.summary, "reason": a.reason} for a in actions]
        outcome.diffs = [render_diff(a.diff, self.max_diff_size) for a in actions if a.diff]
        changes = [a for a in actions if a.changes]
        require_root(facts, self.host.name, step, changes)
        if disturbs is None:
            disturbs = step.disturbs_gpus or any(a.reboot for a in changes)
        if self.before_disturbing and changes and disturbs:
            self.before_disturbing(self.conn, outcome.name, ctx.check, self.outcome.notes)
        if ctx.check:
            outcome.status = predicted(ctx, changes)
        elif actions:
            facts = self._apply(step, ctx, actions, facts)
            outcome.status = "changed" if changes else "ok"
            self.carried.changed_something = self.carried.changed_something or bool(changes)
        outcome.message = "; ".join(ctx.notes)
        self.outcome.notes += ctx.notes
        return facts

    def _settle(self, item: PlannedStep, outcome: StepOutcome, results: list[ExecResult], error: GpunodeError | None,
                started: float, facts: Facts) -> Facts:
        """Ansible's task keys (failed_when, changed_when, register, ignore_errors), then the step is finished;
        an error that still stands stops the host."""
        spec = item.spec
        if spec.register or spec.failed_when or spec.changed_when or spec.ignore_errors:
            variables = self._variables(facts, spec.vars)
            check = self._check_for(spec)
            result, error = task_keys.settle(spec, outcome, results, error, variables, check)
            self.carried.changed_something = (self.carried.changed_something
                                              or outcome.status == "changed")  # failed_when: false
            if spec.register:  # --check, and it would run: its result is unknown
                self.carried.register(spec.register, result,
                                      unknown=check and bool(outcome.actions or outcome.status == "would-change"))
            if spec.sensitive:  # what a sensitive step printed stays a secret wherever a later step shows it
                self.conn.transcript.redact.add(result["stdout"], result["stderr"], *result["stdout_lines"],
                                                *result["stderr_lines"])
        self._finish(outcome, started, facts)
        if error is not None:
            error.host, error.step = self.host.name, spec.name
            self.outcome.failed_step = spec.name
            raise error
        return facts

    def _hide_values(self, step: Step) -> None:
        """A sensitive step's argument values (content, lines, commands) become secrets for the logs."""
        for item in dataclasses.fields(step):
            if item.name in VISIBLE_ARGS:
                continue
            value = getattr(step, item.name)
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    self.conn.transcript.redact.add(text, *text.splitlines())

    def _finish(self, outcome: StepOutcome, started: float, facts: Facts) -> Facts:
        redact = self.conn.transcript.redact  # secrets from vars must not reach diffs, reports or the screen
        if self.conn.sensitive and outcome.diffs:
            outcome.diffs = ["(diff hidden: sensitive step)"]
        self.conn.sensitive = False
        outcome.diffs = [redact(d) for d in outcome.diffs]
        outcome.actions = [{k: redact(v) for k, v in a.items()} for a in outcome.actions]
        outcome.message = redact(outcome.message)
        outcome.seconds = round(time.monotonic() - started, 4)
        self.outcome.steps.append(outcome)
        self.conn.transcript.note(f"  -> {outcome.status} in {outcome.seconds:.2f}s {outcome.message}".rstrip())
        self.events.step_finished(self.host.name, outcome)
        return facts

    def _apply(self, step: Step, ctx: StepContext, actions: list[Action], facts: Facts) -> Facts:
        plain = [a for a in actions if not a.reboot]
        if plain:
            step.apply(ctx, plain)
        for action in actions:
            if action.reboot:
                end_hold(self.conn, self.carried.host, before="reboot")
                facts = self._reboot(action, facts)
        return facts

    def _reboot(self, action: Action, facts: Facts) -> Facts:
        """Reboot, reconnect once the boot marker changed, take the lock and gather facts again."""
        marker = self.conn.boot_marker()
        self.conn.transcript.note(f"rebooting: {action.reason}")
        self.conn.run("nohup sh -c 'sleep 1; systemctl reboot || reboot' >/dev/null 2>&1 &", label="reboot")
        if self.session.lock:
            self.session.lock.release()
            self.session.lock = None
        self.conn.wait_for_reboot(marker, timeout=action.timeout or 600)
        lock = self.session.lock = remote_lock.acquire(self.conn, sections=facts.sections)
        self.carried.host.rebooted()
        facts = lock.facts
        wanted = self.carried.host.target_kernel
        if wanted and wanted != facts.kernel.running:
            raise GpunodeError(
                f"rebooted, but the running kernel is still {facts.kernel.running}, not {wanted}",
                fix="check the boot loader's default entry (grub-set-default / grubby --set-default) and the "
                "instance console; in a container (the lab) the kernel cannot change: bake with reboot: defer",
                step="reboot",
            )
        return facts


def _user_command_from_facts(spec: StepSpec) -> bool:
    """A step whose probe runs the user's own command (`unless:`) and whose `when:` or arguments read facts: the
    last run's facts must not decide whether or which of the user's commands runs, so it gets no guessed probe."""
    return spec.kind == "command" and "unless" in spec.args and "facts" in _reads(spec)


def _reads(spec: StepSpec) -> set[str]:
    """The variables the step's `when:` and arguments read (a template that does not parse: every name it mentions)."""
    return names_read(spec.args, [spec.when])


def _steps(count: int) -> str:
    return f"{count} step{'s' if count != 1 else ''}"


def _name_the_variable(exc: Exception, spec: StepSpec) -> Exception | str:
    """A bad argument value that came from a variable (`default_runtime: "{{ x }}"` with `--var x=maybe`) names the
    variable: that is what the user has to change."""
    names = names_in_order(spec.args.get(getattr(exc, "arg", None) or "", None))
    return f"{exc} (the value comes from the variable {', '.join(names)})" if names else exc
