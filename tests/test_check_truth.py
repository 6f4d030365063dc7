"""Check mode tells the truth across steps: what an earlier step would change reaches the plans of later ones.

Plan level (facts + probe output in, actions out), for what the lab cannot build: the driver's reason names the
kernel that will run (no DKMS build here), and the RPM distros' "unknown until run". The same chains on real
hosts, check against the real run, are in tests/test_lab_check_truth.py.
"""

from __future__ import annotations

import pytest

from gpunode.inventory import Host
from gpunode.steps import StepFailed, build_step
from gpunode.steps.base import StepContext
from gpunode.steps.probe import ProbeOutput
from gpunode.steps.state import HostState
from tests.plan_cases import build_facts

LAB_KERNEL = "6.18.5-lab"  # the lab machine's kernel: no Debian headers package exists for it
EXISTING = ["linux-headers-6.1.0-26-amd64", "linux-headers-6.1.0-26-cloud-amd64", "linux-headers-6.1.0-27-amd64",
            "linux-headers-6.1.0-27-cloud-amd64", "linux-headers-6.1.0-27-rt-amd64"]
DRIVER_PROBE = {"nouveau": "absent\n", "dkms": "", "held": "", "persistenced": "disabled\n", "pkgs.installed": "",
                "pkgs.lists": "9\n1795316241\n1795316250\n"}


def ctx_for(facts, probe: dict[str, str], state: HostState, check: bool = True, step=None) -> StepContext:
    """The probe output asks what `step` asks on these facts (by default: the sections given), as the runner's."""
    asked = step.probe(facts) or {} if step is not None else None
    return StepContext(Host(name="h", address="h"), facts, conn=None, check=check,  # type: ignore[arg-type]
                       probe=ProbeOutput(probe, asked=asked), state=state)


def debian_facts():
    return build_facts("debian-12.txt", {"kernel": {"running": LAB_KERNEL, "running_headers_present": False,
                                                    "installed": [], "headers": []},
                                         "gpus": [{"slot": "0000:18:00.0", "device_id": "0x2330",
                                                   "class_code": "0x030200"}]})


def test_check_mode_plans_the_driver_and_the_reboot_for_the_kernel_the_upgrade_installs():
    facts, state = debian_facts(), HostState()
    kernel = build_step("kernel_headers", {"policy": "upgrade"})
    # what the lab's lists hold: the meta package's candidate depends on 6.1.0-27, backports list a newer kernel
    probe = "(none)\n@@next 6.1.0-27-cloud-amd64\n" + "\n".join([*EXISTING, "linux-headers-6.12.1+deb12-cloud-amd64"])
    actions = kernel.plan(ctx_for(facts, {"headers": probe, "held": ""}, state))
    assert actions and "else the newest kernel" in actions[0].summary
    assert state.target_kernel == "6.1.0-27-cloud-amd64"  # what the meta package installs, not the newest listed
    driver = build_step("nvidia_driver", {"method": "distro", "branch": 535})
    install = [a for a in driver.plan(ctx_for(facts, DRIVER_PROBE, state, step=driver))
               if "install the NVIDIA" in a.summary]
    assert install[0].reason.endswith("building for kernel 6.1.0-27-cloud-amd64")
    assert LAB_KERNEL not in install[0].reason + install[0].fix
    reboot = build_step("reboot", {}).plan(ctx_for(facts, {}, state))
    assert [a.reboot for a in reboot] == [True]
    assert reboot[0].reason == f"new kernel 6.1.0-27-cloud-amd64 will be installed; {LAB_KERNEL} runs"


def test_headers_that_exist_for_the_running_kernel_mean_no_reboot():
    facts, state = debian_facts(), HostState()
    kernel = build_step("kernel_headers", {"policy": "upgrade"})
    kernel.plan(ctx_for(facts, {"headers": "6.18.5-1\n" + "\n".join(EXISTING), "held": ""}, state))
    assert not state.reboot_required and not state.target_kernel
    assert build_step("reboot", {}).plan(ctx_for(facts, {}, state)) == []


def test_debian_without_the_meta_package_answer_is_unknown_until_run():
    facts, state = debian_facts(), HostState()
    build_step("kernel_headers", {"policy": "upgrade"}).plan(
        ctx_for(facts, {"headers": "(none)\n" + "\n".join(EXISTING), "held": ""}, state))
    assert state.target_kernel_unknown and not state.target_kernel
    assert state.reboot_reasons[0].startswith("would change (unknown until run)")


def test_rpm_upgrade_is_unknown_until_run_never_ok():
    facts = build_facts("rocky-9.txt", {"kernel": {"running": "5.14.0-362.el9.x86_64", "installed": [],
                                                   "headers": [], "running_headers_present": False}})
    state = HostState()
    build_step("kernel_headers", {"policy": "upgrade"}).plan(ctx_for(facts, {"held": ""}, state))
    reboot = build_step("reboot", {}).plan(ctx_for(facts, {}, state))
    assert reboot and reboot[0].reason.startswith("would change (unknown until run)")
    assert state.target_kernel_unknown


def test_a_real_run_learns_the_kernel_from_the_run_not_from_a_guess():
    facts, state = debian_facts(), HostState()
    kernel = build_step("kernel_headers", {"policy": "upgrade"})
    probe = "(none)\n@@next 6.1.0-27-cloud-amd64\n" + "\n".join(EXISTING)
    kernel.plan(ctx_for(facts, {"headers": probe, "held": ""}, state, check=False))
    assert not state.reboot_required and not state.target_kernel  # set by kernel_headers.sh's @@target / @@reboot


def test_containerd_that_an_earlier_step_installs_is_a_predicted_change():
    facts, state = debian_facts(), HostState()
    packages = build_step("packages", {"names": ["containerd"]})
    ctx = ctx_for(facts, {"installed": "", "lists": "9\n1795316241\n1795316250\n"}, state)
    assert packages.plan(ctx)
    assert state.installing == ["containerd"]
    runtime = build_step("container_runtime", {"docker": False})
    empty = {"daemon": "absent\n", "main": "absent\n", "dropin": "absent\n", "version": "", "dump": "", "default": "",
             "ctk": "", "cdi": ""}
    (action,) = runtime.plan(ctx_for(facts, empty, state))
    assert action.changes and action.reason.startswith("would change (unknown until run)")
    assert runtime.plan(ctx_for(facts, empty, HostState())) == []  # nothing installs it: containerd: auto skips


def test_diffs_are_capped_fast_and_say_what_was_cut():
    import time

    from gpunode.steps.diffs import DEFAULT_MAX_DIFF_SIZE, FileDiff, parse_size, render

    big = "".join(f"line {i:09d} {'x' * 80}\n" for i in range(220_000))  # about 20 MB
    started = time.monotonic()
    new_file = render(FileDiff("/etc/big", "", big), DEFAULT_MAX_DIFF_SIZE)
    changed = render(FileDiff("/etc/big", big, big.replace("line 000000007", "LINE")), DEFAULT_MAX_DIFF_SIZE)
    assert time.monotonic() - started < 5
    assert len(new_file.encode()) < DEFAULT_MAX_DIFF_SIZE + 200
    assert new_file.startswith("--- /etc/big (now)\n+++ /etc/big (planned)\n")
    assert new_file.splitlines()[-1].startswith("... diff cut at 99 KB of 20.")
    assert "--max-diff-size" in new_file.splitlines()[-1]
    assert "diff not computed: the file is 20.1 MB now and 20.1 MB planned" in changed
    small = render(FileDiff("/etc/a", "a\n", "b\n"), DEFAULT_MAX_DIFF_SIZE)
    assert small == "--- /etc/a (now)\n+++ /etc/a (planned)\n@@ -1 +1 @@\n-a\n+b\n"
    assert render("x\n" * 10, 6) == ("x\nx\nx\n... diff cut at 6 B of 20 B (--max-diff-size raises the limit of 6 B "
                                     "per step)\n")
    assert [parse_size(v) for v in ("102400", "100K", "2m", "1MB")] == [102400, 102400, 2097152, 1048576]
    for bad in ("0", "x", "-5", "1G"):
        try:
            parse_size(bad)
        except ValueError as exc:
            assert "--max-diff-size must be a positive size" in str(exc)
        else:
            raise AssertionError(bad)


def test_a_service_that_an_earlier_step_installs_is_unknown_until_run_not_a_failure():
    facts, state = debian_facts(), HostState()
    build_step("packages", {"names": ["at"]}).plan(
        ctx_for(facts, {"installed": "", "lists": "9\n1795316241\n1795316250\n"}, state))
    service = build_step("service", {"name": "atd", "state": "started", "enabled": True})
    missing = {"unit": "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n"}
    actions = service.plan(ctx_for(facts, missing, state))
    assert [a.summary for a in actions] == ["enable atd", "start atd"]
    assert all(a.reason == "would change (unknown until run): atd is not installed yet, an earlier step installs at"
               for a in actions)
    with pytest.raises(StepFailed, match="unit atd not found"):  # nothing installs it: the run would fail too
        service.plan(ctx_for(facts, missing, HostState()))
    with pytest.raises(StepFailed, match="unit atd not found"):  # and a real run never guesses
        service.plan(ctx_for(facts, missing, state, check=False))
