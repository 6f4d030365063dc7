"""Time to ready by phase (issue 40): the phases timed inside a command from its output (connection/marks.py), the
accounting by step, command and mark (report/phases.py), and a whole host run on a stand-in host whose install
prints what a Debian 12 lab host printed (tests/data/phases/SOURCES.md)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gpunode.connection import transcript as transcript_module
from gpunode.connection.marks import Mark, Marks
from gpunode.connection.transcript import ExecRecord
from gpunode.report.model import RunResult, StepOutcome
from gpunode.report.phases import label_phase, phase_line, phase_times
from gpunode.report.summary import print_summary
from tests.run_cases import run_case

DATA = Path(__file__).parent / "data" / "phases"
KERNEL = (DATA / "kernel-install.txt").read_text().splitlines()
DRIVER = (DATA / "driver-install.txt").read_text().splitlines()


def feed(lines: list[str], slow: dict[str, float]) -> Marks:
    """Each line arrives 0.01 s after the one before, or `slow[prefix]` s after a line that starts with prefix."""
    marks, now = Marks(), 100.0
    marks.begin()
    for line in lines:
        marks.line(line, now)
        now += next((gap for prefix, gap in slow.items() if line.startswith(prefix)), 0.01)
    marks.end(now, 3)
    return marks


def test_kernel_install_two_generations_named_by_what_asked() -> None:
    marks = feed(KERNEL, {"update-initramfs: Generating": 4.0})
    assert [(m.kind, m.what, m.after, m.command) for m in marks.done] == [
        ("initramfs", "/boot/initrd.img-6.1.0-56-cloud-amd64", "Setting up linux-image-6.1.0-56-cloud-amd64 "
         "(6.1.192-2)", 3),
        ("initramfs", "/boot/initrd.img-6.1.0-56-cloud-amd64", "Processing triggers for initramfs-tools "
         "(0.142+deb12u3)", 3)]
    # mkinitramfs' own "W: No zstd ..." line belongs to the generation: it ends at the next dpkg line
    assert [round(m.seconds, 2) for m in marks.done] == [4.01, 4.01]


def test_driver_install_three_trigger_runs_in_one_transaction() -> None:
    marks = feed(DRIVER, {"update-initramfs: Generating": 5.0})
    assert len(marks.done) == 3
    assert {m.after for m in marks.done} == {"Processing triggers for initramfs-tools (0.142+deb12u3)"}
    # the last generation ends the install's output: it ends with the command
    assert [round(m.seconds, 2) for m in marks.done] == [5.01, 5.01, 5.01]


def test_dkms_build_ends_when_the_make_line_arrives() -> None:
    # dkms 3.0.10 on a lab host: `Building module:`, cleaning, then the make line, whose progress dots come without
    # a newline: the line arrives whole only once make ended (tests/data/phases/dkms-build.txt)
    lines = (DATA / "dkms-build.txt").read_text().splitlines()
    marks = feed(lines, {"Cleaning build area": 130.0})  # the second cleaning comes after: its gap is not the build's
    (build,) = marks.done
    assert build.kind == "dkms build" and round(build.seconds, 2) == 130.01


def test_phase_times_carve_marks_out_of_their_command() -> None:
    steps = [StepOutcome("wait", "wait_for_package_manager", "ok", seconds=0.5),
             StepOutcome("kernel headers", "kernel_headers", "changed", seconds=30.0),
             StepOutcome("NVIDIA driver", "nvidia_driver", "changed", seconds=40.0),
             StepOutcome("say hi", "command", "changed", seconds=1.0)]
    records = [ExecRecord("probe of 3 steps", 0, 2.0, 0, 0, False, "probe"),
               ExecRecord("install the newest kernel", 0, 28.0, 0, 0, True, "kernel headers"),
               ExecRecord("install the NVIDIA 535 driver", 0, 25.0, 0, 0, True, "NVIDIA driver"),
               ExecRecord("install nvidia-current/535 for 6.1 (x86_64) from the module cache (built on h1)", 0, 6.0, 0,
                          0, True,
                          "NVIDIA driver"),
               ExecRecord("load the driver and start nvidia-persistenced", 0, 2.0, 0, 0, True, "NVIDIA driver")]
    marks = [Mark("initramfs", "/boot/initrd.img-6", "", 0.0, 5.0, 1), Mark("initramfs", "/boot/initrd.img-6", "",
                                                                          0.0, 4.0, 2),
             Mark("initramfs", "/boot/initrd.img-6", "", 0.0, 9.0, 0)]  # in the probe: not a step's, not counted
    times = phase_times(steps, records, marks, {"connect": 1.0, "lock + facts": 2.0, "steps": 71.5, "probe": 2.0})
    assert times == {"package manager wait": 0.5, "kernel and headers": 25.0, "driver packages": 28.0,
                     "module": 6.0, "initramfs": 9.0, "services": 2.0, "other steps": 1.0, "gpunode": 5.0}
    assert sum(times.values()) == pytest.approx(sum(s.seconds for s in steps) + 5.0)


@pytest.mark.parametrize(("label", "phase"), [
    ("install nvidia-current/535.309.01 for 6.1.0-56-cloud-amd64 (x86_64, proprietary) from the module cache",
     "module"),
    ("wait for hp-h40's DKMS build of nvidia-current/535.309.01 for 6.1.0-56-cloud-amd64 (x86_64), then install it "
     "from the module cache", "module"),
    ("driver version", None),
    ("pack nvidia-current/535.309.01 for 6.1.0-56-cloud-amd64 (x86_64, proprietary) for the module cache", "module"),
    ("install the NVIDIA 535 driver (proprietary modules): nvidia-kernel-dkms, nvidia-smi (the kernel module from "
     "the module cache)", None),
    ("build nvidia-current/535.309.01 for kernel 6.1.0-56-cloud-amd64 with DKMS", "module"),
    ("build nvidia-current/535.309.01 for 6.1.0-56-cloud-amd64 (x86_64) with DKMS and add it to the module cache",
     "module"),
    ("rebuild the initramfs images older than the nouveau blacklist", "initramfs"),
    ("enable nvidia-persistenced", "services"),
    ("install the NVIDIA 535 driver (proprietary modules): nvidia-kernel-dkms", None),
])
def test_label_phase(label: str, phase: str | None) -> None:
    assert label_phase(label) == phase


KERNEL_REPLY = "\n".join(KERNEL) + "\n"
CASE = {"name": "phases", "playbook": """steps:
  - name: wait for the package manager
    wait_for_package_manager: {timeout: 60}
  - name: install the kernel
    command: {cmd: "apt-get install -y linux-image-cloud-amd64"}
  - name: rebuild the initramfs
    command: {cmd: "update-initramfs -u -k all", creates: /x}
""", "replies": [{"label": "run: apt-get install -y linux-image-cloud-amd64", "stdout": KERNEL_REPLY},
                 {"label": "run: update-initramfs -u -k all"}, {"probe": "guards", "stdout": ""},
                 {"probe": "wait_for_package_manager", "stdout": ""}]}


def test_host_run_reports_phases_and_generations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    clock = itertools.count(1000.0, 0.5)  # each line 0.5 s after the one before, as the transcript sees them
    monkeypatch.setattr(transcript_module, "now", lambda: next(clock))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    outcome, conn = run_case(CASE, tmp_path)
    assert not conn.unmatched, conn.unmatched
    assert outcome.status == "changed", outcome.error
    assert [(t["kind"], t["after"], t["command"], t["seconds"]) for t in outcome.timed] == [
        ("initramfs", "Setting up linux-image-6.1.0-56-cloud-amd64 (6.1.192-2)",
         "run: apt-get install -y linux-image-cloud-amd64", 1.0),
        ("initramfs", "Processing triggers for initramfs-tools (0.142+deb12u3)",
         "run: apt-get install -y linux-image-cloud-amd64", 1.0)]
    assert outcome.phase_times["initramfs"] == 2.0
    # a step probed again after a change (the last one): its command is still the step's, not the probe's
    assert [(c["label"], c["step"]) for c in outcome.commands if c["new_session"]][-2:] == [
        ("run: apt-get install -y linux-image-cloud-amd64", "install the kernel"),
        ("run: update-initramfs -u -k all", "rebuild the initramfs")]
    assert set(outcome.phase_times) >= {"gpunode", "initramfs"}  # the rest: too quick on a stand-in to show
    assert "phase_times" in outcome.to_dict() and outcome.to_dict()["timed"] == outcome.timed
    print_summary(RunResult("phases", False, [outcome], 3.0))
    shown = capsys.readouterr().out
    assert "phases (2 initramfs generations): " in shown and phase_line(outcome.phase_times)[:20] in shown


# ---- one initramfs generation per install (steps/initramfs_pause.py) ------------------------------------------
# The stand-in update-initramfs keeps the two behaviours of initramfs-tools 0.142's that the pause relies on
# (/usr/sbin/update-initramfs lines 4-12 and 246-251: the conf is sourced, -u does nothing with update_initramfs=no,
# -c ignores it) and logs each generation; the install stand-in does what the kernel's postinst hook and the
# trigger do (/etc/kernel/postinst.d/initramfs-tools: nothing with INITRD=No). The real ones ran on a lab host:
# tests/test_lab_phases.py.
# The GRUB hook stand-in logs its arguments: the real one (grub2's zz-update-grub) does nothing in a container; a
# real reboot onto the image it lists is the VM suite's (tests/test_vm_*.py).
FAKE_GRUB_HOOK = """#!/bin/sh
echo "grub $*" >> "$LOG"
"""
FAKE_UPDATE_INITRAMFS = """#!/bin/sh
update_initramfs=yes
. "$CONF"
case "$1" in
  -u) [ "$update_initramfs" = no ] && { echo "update-initramfs: Not updating initramfs."; exit 0; }
      echo "generate -u" >> "$LOG";;
  -c) echo "generate -c $3" >> "$LOG"; : > "$BOOT/initrd.img-$3";;
esac
"""
HOOK = '[ "$INITRD" = No ] || update-initramfs -c -k {k}'


def pause_sandbox(tmp_path: Path, install: str, conf_text: str = "update_initramfs=yes\n",
                  ends: bool = True) -> tuple[int, str, str]:
    """`install` run as a paused install (`install` may be several, joined by " ;; ": each paused, as the run's
    installs are), then (ends) the run's end of the hold."""
    import os
    import subprocess

    from gpunode.steps.initramfs_pause import CONF, FLUSH, HOOK, paused
    bin_dir, boot, modules = tmp_path / "bin", tmp_path / "boot", tmp_path / "lib" / "modules"
    for folder in (bin_dir, boot, modules / "6.1.0-old"):
        folder.mkdir(parents=True, exist_ok=True)
    (boot / "vmlinuz-6.1.0-old").write_text("")
    (boot / "initrd.img-6.1.0-old").write_text("")
    (tmp_path / "conf").write_text(conf_text)
    tool = bin_dir / "update-initramfs"
    tool.write_text(FAKE_UPDATE_INITRAMFS)
    tool.chmod(0o755)
    hook = tmp_path / "zz-update-grub"
    hook.write_text(FAKE_GRUB_HOOK)
    hook.chmod(0o755)
    script = " && ".join([*(paused(part) for part in install.split(" ;; ") if part), *([FLUSH] if ends else [])])
    script = script.replace(CONF, str(tmp_path / "conf")).replace("/lib/modules", str(modules)) \
        .replace("/boot/", f"{boot}/").replace(HOOK, str(hook))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CONF": str(tmp_path / "conf"), "LOG": str(tmp_path / "log"),
           "BOOT": str(boot), "M": str(modules)}
    result = subprocess.run(["sh", "-c", script], env={**os.environ, **env}, capture_output=True, text=True)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    return result.returncode, log, (tmp_path / "conf").read_text()


NEW_KERNEL = 'mkdir -p "$M/6.1.0-new" && : > "$BOOT/vmlinuz-6.1.0-new" && ' + HOOK.format(k="6.1.0-new")


def test_kernel_install_paused_makes_one_image_and_its_grub_entry(tmp_path: Path) -> None:
    code, log, conf = pause_sandbox(tmp_path, NEW_KERNEL + " && update-initramfs -u && update-initramfs -u")
    assert (code, conf) == (0, "update_initramfs=yes\n")
    boot = tmp_path / "boot"
    assert log == f"generate -c 6.1.0-new\ngrub 6.1.0-new {boot}/vmlinuz-6.1.0-new\n"


def test_the_kernel_and_driver_installs_of_one_run_make_one_image(tmp_path: Path) -> None:
    """The kernel's install, then the driver's (its trigger three times), each paused: the hold spans both, and
    the run's end makes the new kernel's image once, with the driver's files in it."""
    driver = "update-initramfs -u; update-initramfs -u; update-initramfs -u"
    code, log, _ = pause_sandbox(tmp_path, f"{NEW_KERNEL} ;; {driver}", ends=False)
    assert (code, log) == (0, "")  # held: nothing generated yet
    code, log, conf = pause_sandbox(tmp_path, f"{NEW_KERNEL} ;; {driver}")
    assert (code, log.splitlines()[0], conf) == (0, "generate -c 6.1.0-new", "update_initramfs=yes\n")
    assert len(log.splitlines()) == 2  # the image, then its GRUB entry


def test_the_end_of_a_hold_does_nothing_when_nothing_is_held(tmp_path: Path) -> None:
    assert pause_sandbox(tmp_path, "", conf_text="x=1\n") == (0, "", "x=1\n")


def test_a_bare_host_kernel_install_without_a_pause_still_gets_its_image(tmp_path: Path) -> None:
    """No initramfs-tools before the install (a bare container): no pause can be held, INITRD=No still holds the
    kernel hook back, and the install's end makes the image (the trigger may have made it already: then nothing)."""
    (tmp_path / "conf").write_text("")
    code, log, _ = pause_sandbox(tmp_path, f"rm -f $CONF && {NEW_KERNEL} && : > $CONF", ends=False)
    assert (code, log.splitlines()[0]) == (0, "generate -c 6.1.0-new")


def test_driver_install_paused_makes_one_update_and_keeps_its_exit(tmp_path: Path) -> None:
    code, log, conf = pause_sandbox(tmp_path, "update-initramfs -u; update-initramfs -u; update-initramfs -u; "
                                    "exit 7", conf_text="# mine\nupdate_initramfs=all\n")
    assert (code, log, conf) == (7, "generate -u\n", "# mine\nupdate_initramfs=all\n")


def test_a_pause_already_held_is_kept_until_the_hold_ends(tmp_path: Path) -> None:
    from gpunode.steps.initramfs_pause import PAUSE_LINE
    code, log, conf = pause_sandbox(tmp_path, "update-initramfs -u", conf_text=f"x=1\n{PAUSE_LINE}\n", ends=False)
    assert (code, log, conf) == (0, "", f"x=1\n{PAUSE_LINE}\n")
    code, log, conf = pause_sandbox(tmp_path, "update-initramfs -u", conf_text=f"x=1\n{PAUSE_LINE}\n")
    assert (code, log, conf) == (0, "generate -u\n", "x=1\n")


def test_left_pause_is_removed_and_the_image_updated() -> None:
    from gpunode.steps.initramfs_left import left_initramfs_pause
    from gpunode.steps.initramfs_pause import PAUSE_LINE
    assert left_initramfs_pause("") == []
    from gpunode.steps.initramfs_pause import FLUSH
    (action,) = left_initramfs_pause(PAUSE_LINE + "\n")
    assert action.command == FLUSH  # as a run ends its own hold: images for kernels left without one, else -u


@pytest.mark.parametrize(("kind", "name", "once"), [
    ("kernel_headers", "debian12-fresh", True), ("nvidia_driver", "debian12-fresh", True),
    ("nvidia_driver", "rocky9-fresh", False),  # dracut: no update-initramfs, nothing held back
])
def test_installs_held_to_one_generation_where_initramfs_tools_is(kind: str, name: str, once: bool) -> None:
    from gpunode.steps import build_step
    from gpunode.steps.initramfs_pause import MARK
    from tests.plan_cases import context, find_case
    case = find_case(kind, name)
    step = build_step(case["kind"], dict(case.get("args") or {}))
    ctx = context(case, step=step)
    installs = [a for a in step.plan(ctx) if a.installs or "install" in a.summary.split()[:1]]
    assert installs and any(a.initramfs_once for a in installs) == once
    for action in installs:
        assert (MARK in ctx.command_for(action)) == action.initramfs_once


def test_lab_cgroup_root_from_mounts() -> None:
    from gpunode.lab.cgroup import cgroup2_root
    hybrid = ("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
              "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    assert cgroup2_root(hybrid) == Path("/sys/fs/cgroup/unified")
    assert cgroup2_root("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == Path("/sys/fs/cgroup")
    assert cgroup2_root("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n") is None


@pytest.mark.parametrize("kind", ["kernel_headers", "nvidia_driver"])
def test_a_pause_left_by_a_cut_run_goes_first(kind: str) -> None:
    import copy

    from gpunode.steps import build_step
    from gpunode.steps.initramfs_pause import PAUSE_LINE
    from tests.plan_cases import context, find_case
    case = copy.deepcopy(find_case(kind, "debian12-fresh"))
    case["probe"] = {**(case.get("probe") or {}), "initramfs_pause": PAUSE_LINE + "\n"}
    step = build_step(case["kind"], dict(case.get("args") or {}))
    actions = step.plan(context(case, step=step))
    first = [a.summary for a in actions if "pause of initramfs" in a.summary]
    assert first and actions.index(next(a for a in actions if a.summary == first[0])) <= 1  # after a repair at most


# ---- one hold and one list refresh per run: what StepContext.command_for runs ------------------------------------
class _Commands:
    """What StepContext sends the host, in order (the decisions under test here; tests/test_vm_initramfs_hold.py
    runs the commands on a real VM)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def run(self, command: str, **_: object):  # noqa: ANN201
        from types import SimpleNamespace
        self.sent.append(command)
        return SimpleNamespace(ok=True, exit_code=0)


def _bare_context(check: bool = False):  # noqa: ANN202
    from gpunode.inventory import Host
    from gpunode.steps import StepContext
    from tests.plan_cases import DEFAULT_OS, build_facts
    return StepContext(Host(name="h", address="h"), build_facts(DEFAULT_OS, {}), conn=_Commands(),  # type: ignore[arg-type]
                       check=check)


def test_the_first_command_after_held_installs_ends_the_hold_once() -> None:
    from gpunode.steps import Action
    from gpunode.steps.initramfs_pause import FLUSH, MARK
    ctx = _bare_context()
    kernel = ctx.command_for(Action("kernel", command="apt-get install linux-image-cloud-amd64", initramfs_once=True))
    driver = ctx.command_for(Action("driver", command="apt-get install nvidia-driver", initramfs_once=True))
    assert MARK in kernel and MARK in driver and not kernel.startswith(FLUSH) and not driver.startswith(FLUSH)
    assert ctx.state.initramfs_held
    conf = "/etc/modprobe.d/x.conf"
    write = ctx.command_for(Action("blacklist", command=f"cat > {conf}", writes=conf))
    assert write == f"cat > {conf}" and ctx.state.initramfs_held and not ctx.conn.sent  # a file write: no generation
    assert ctx.command_for(Action("hold", command="apt-mark hold nvidia-driver")) == "apt-mark hold nvidia-driver"
    assert ctx.conn.sent == [FLUSH] and not ctx.state.initramfs_held  # the hold ended first, as its own command
    assert ctx.command_for(Action("next", command="true")) == "true" and ctx.conn.sent == [FLUSH]


def test_check_mode_holds_nothing() -> None:
    from gpunode.steps import Action
    ctx = _bare_context(check=True)
    ctx.command_for(Action("kernel", command="apt-get install x", initramfs_once=True))
    assert not ctx.state.initramfs_held


def test_the_lists_are_refreshed_once_per_run_until_a_source_changes() -> None:
    from gpunode.steps import Action
    from gpunode.steps.pkgmgr import LISTS_FRESH_ENV, AptManager, Wanted
    ctx = _bare_context()
    install = AptManager().install([Wanted("nvidia-smi")], refresh=True, recommends=False)
    assert ctx.command_for(Action("install", command=install)) == install  # the run has not refreshed them yet
    ctx.state.apt_lists_refreshed = True  # StepContext.run saw `apt-get ... update` succeed
    after = ctx.command_for(Action("install", command=install))
    assert AptManager.update() not in after and after.endswith("install -- nvidia-smi")
    script = "sh -c '...apt-get update...' kernel-headers upgrade apt"
    assert ctx.command_for(Action("kernel", command=script, refreshes=True)) == f"{LISTS_FRESH_ENV} {script}"
    ctx.wrote("/etc/apt/sources.list.d/nvidia.list")  # a new source: the next install refreshes again
    assert ctx.command_for(Action("install", command=install)) == install
