"""The kernel guard without a lab: its hooks as run-parts orders them, its script as sh and shellcheck read it, its
config as sh sources it, the step converged, and verify-gpu's reading of the guard's record. The hooks' effect on a
real kernel install is tests/test_lab_kernel_guard.py."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpunode.modcache.guard_hooks import (
    CACHE_HOOK,
    CONF_FILE,
    KEEP_HOOK,
    config_text,
    guard_script,
    hook_paths,
    hook_text,
    parse_state,
)
from gpunode.parsers.dkms import NVIDIA_MODULE_PATTERN
from gpunode.steps import build_step
from gpunode.steps.remote_file import CONTENT_PREFIX
from gpunode.verify import analyze
from gpunode.verify.evidence import Evidence, Expectations
from gpunode.verify.host_evidence import evidence_from, split_sections
from tests.plan_cases import build_facts, context

NEW, KEPT = "6.12.117+deb12-cloud-amd64", "6.1.0-56-cloud-amd64"
# /var/lib/gpunode/kernel-guard.state as the guard wrote it on a lab host (tests/test_lab_kernel_guard.py, case b)
STATE = f"""kernel={NEW}
missing=nvidia-current/535.247.01
kept={KEPT}
entry=gnulinux-advanced-/dev/vda1>gnulinux-{KEPT}-advanced-/dev/vda1
boot_default=kept: saved_entry=gnulinux-advanced-/dev/vda1>gnulinux-{KEPT}-advanced-/dev/vda1
time=2026-11-29T05:06:35Z
"""


@pytest.mark.skipif(not shutil.which("run-parts"), reason="run-parts (debianutils) is not installed")
def test_run_parts_runs_the_cache_hook_before_dkms_and_the_keep_hook_after_zz_update_grub(tmp_path):
    """run-parts itself (the program the kernel packages call) orders the hooks among Debian's: dkms's (dkms-project/
    dkms v3.0.10 Makefile lines 52 and 63), initramfs-tools' and GRUB's zz-update-grub."""
    folder = tmp_path / "postinst.d"
    folder.mkdir()
    names = ["dkms", "initramfs-tools", "zz-update-grub", CACHE_HOOK, KEEP_HOOK, "apt-auto-removal"]
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    order = [line.rsplit("/", 1)[1] for line in subprocess.run(
        ["run-parts", "--test", str(folder)], capture_output=True, text=True, check=True).stdout.split()]
    assert order == [CACHE_HOOK, "apt-auto-removal", "dkms", "initramfs-tools", "zz-update-grub", KEEP_HOOK]
    assert set(hook_paths()) == {f"/etc/kernel/{d}/{n}" for d in ("postinst.d", "header_postinst.d")
                                 for n in (CACHE_HOOK, KEEP_HOOK)}


@pytest.mark.parametrize("form", ["deb", "tar"])
def test_the_guard_script_is_posix_sh(form, tmp_path):
    """dash parses it, and shellcheck finds no warning in it (as sh)."""
    script = tmp_path / "kernel-guard"
    script.write_text(guard_script(form))
    subprocess.run(["dash", "-n", str(script)], check=True)
    for name in (CACHE_HOOK, KEEP_HOOK):
        (tmp_path / name).write_text(hook_text(name))
        subprocess.run(["dash", "-n", str(tmp_path / name)], check=True)
    if shutil.which("shellcheck"):
        checked = subprocess.run(["shellcheck", "-s", "sh", "-S", "warning", str(script)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stdout


def test_the_nvidia_module_names_in_the_script_are_the_parsers():
    """The script's `grep -E` pattern picks the same DKMS module names as the verify parser's regex."""
    pattern = re.search(r"grep -Eq '([^']+)'", guard_script()).group(1)
    names = ["nvidia", "nvidia-current", "nvidia-current-open", "nvidia-tesla-535", "nvidia-srv", "nvidia-fs",
             "nvidia-peermem", "gpunode-hello", "nvidiax", "nvidia-open-550"]
    picked = subprocess.run(["grep", "-E", pattern], input="\n".join(names) + "\n", capture_output=True,
                            text=True).stdout.split()
    assert picked == [n for n in names if re.match(NVIDIA_MODULE_PATTERN, n)]
    assert "nvidia-current" in picked and "nvidia-fs" not in picked


def test_the_config_reads_back_the_same_values_in_sh(tmp_path):
    """Every value quoted: sh sources the file and gets each value as written, quotes and spaces included."""
    conf = tmp_path / "kernel-guard.conf"
    conf.write_text(config_text("nvidia-current", "535.247.01", "", "", "/mnt/it's a share"))
    shown = subprocess.run(["sh", "-c", f'. {conf}; printf "%s|%s|%s|%s|%s" "$GUARD_MODULE" "$GUARD_VERSION" '
                                        '"$GUARD_FLAVOUR" "$GUARD_ARCH" "$GUARD_CACHE"'],
                           capture_output=True, text=True, check=True).stdout
    assert shown == "nvidia-current|535.247.01|||/mnt/it's a share"
    assert all(re.match(r"^GUARD_[A-Z]+='", line) for line in conf.read_text().splitlines()[1:])


def _probe_of(content: str, mode: str) -> str:
    import base64

    return f"present\n{mode} root root\n{CONTENT_PREFIX}{base64.b64encode(content.encode()).decode()}\n"


def test_converged_when_every_file_is_in_place_and_rewritten_when_one_differs():
    step = build_step("kernel_guard", {"cache": "https://modules.example.com/gpunode/"})
    assert step.cache == "https://modules.example.com/gpunode"
    facts = build_facts("debian-12", {})
    files = step._files(facts)
    assert files[CONF_FILE][0].count("GUARD_CACHE='https://modules.example.com/gpunode'") == 1
    probe = {f"file{i}": _probe_of(content, mode.lstrip("0")) for i, (content, mode) in enumerate(files.values())}
    case = {"kind": "kernel_guard", "args": {"cache": "https://modules.example.com/gpunode/"}, "probe": probe}
    assert step.plan(context(case, step=step)) == []
    probe["file0"] = _probe_of("#!/bin/sh\nexit 0\n", "755")
    changed = step.plan(context({**case, "probe": probe}, step=step))
    assert [a.summary for a in changed] == ["update /usr/lib/gpunode/kernel-guard"]


def _by_id(evidence: Evidence) -> dict:
    return {f.id: f for f in analyze(evidence)}


def test_verify_says_the_kernel_installed_without_its_module_and_the_default_kept():
    running = "6.1.0-55-cloud-amd64"
    status = [f"nvidia-current/535.247.01, {running}, x86_64: installed",
              f"nvidia-current/535.247.01, {KEPT}, x86_64: installed"]
    base = {"dkms_status": status, "running_kernel": running, "next_boot_kernel": NEW, "next_boot_headers": True}
    kept = _by_id(Evidence(**base, kernel_guard=parse_state(STATE)))
    finding = kept["kernel-guard-kept-default"]
    assert finding.severity == "warning"
    assert finding.summary == (f"kernel {NEW} installed without its NVIDIA module (nvidia-current/535.247.01); boot "
                               f"default kept at {KEPT}")
    assert f"dkms autoinstall -k {NEW}" in finding.remedy and "dpkg --configure -a" in finding.remedy
    assert "dkms-next-boot-kernel" not in kept  # the guard kept the default: it is not what boots next
    unguarded = _by_id(Evidence(**base))
    assert "dkms-next-boot-kernel" in unguarded and "kernel-guard-kept-default" not in unguarded

    not_kept = parse_state(STATE.replace("boot_default=kept: saved_entry=",
                                         "boot_default=unchanged: no GRUB (grub-set-default, /boot/grub) on this node"
                                         "\nx="))
    failed = _by_id(Evidence(**base, kernel_guard=not_kept))
    assert failed["kernel-guard-default-not-kept"].severity == "critical"
    assert "no GRUB (grub-set-default, /boot/grub) on this node" in failed["kernel-guard-default-not-kept"].summary
    assert "dkms-next-boot-kernel" in failed  # the next boot does take the kernel without the module

    built_since = [*status, f"nvidia-current/535.247.01, {NEW}, x86_64: installed"]
    done = _by_id(Evidence(**{**base, "dkms_status": built_since}, kernel_guard=parse_state(STATE)))
    assert not [i for i in done if i.startswith("kernel-guard") or i == "dkms-next-boot-kernel"]


def test_the_guard_record_travels_in_the_evidence_section():
    facts = build_facts("debian-12", {})
    _, sections = split_sections(f"@@evidence kernel-guard\n{STATE}@@evidence end\n")
    assert evidence_from(facts, sections, Expectations()).kernel_guard == parse_state(STATE)
    _, none = split_sections("@@evidence kernel-guard\n@@evidence end\n")
    assert evidence_from(facts, none, Expectations()).kernel_guard is None


@pytest.mark.parametrize(("args", "message"), [
    ({"module": "nvidia;reboot"}, "kernel_guard.module 'nvidia;reboot' is not a plain name"),
    ({"cache": "/mnt/$(reboot)"}, "holds a quote, $, ` or a newline"),
])
def test_bad_arguments_are_refused_before_any_host(args, message):
    from gpunode.steps.model import ArgumentError

    with pytest.raises(ArgumentError, match=re.escape(message)):
        build_step("kernel_guard", args)
