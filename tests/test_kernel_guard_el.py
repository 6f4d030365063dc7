"""The kernel guard on dnf hosts, run for real where it can be here: the plugins as systemd's own kernel-install
(252, this machine's) orders and calls them, the guard script with dkms's own program and kernel-install plugin
(a dkms checkout: GPUNODE_DKMS_SOURCE, opt-in), in a private mount namespace whose /etc, /usr/lib, /usr/sbin,
/var/lib, /var/log and /boot are overlays of this machine's (nothing of the host is written).

Not real here: grubby (no EL boot loader on this machine: a stand-in keeps the default in a file, with grubby's
--default-kernel/--set-default PATH), grubby's 20-grubby.install (a stand-in that copies the image to /boot and
sets the default when UPDATEDEFAULT=yes), and the NVIDIA module itself (no EL kernel headers to build it: dkms's
tree holds a built and installed module file that dkms's own status reads)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.modcache.guard_el import CACHE_PLUGIN, INSTALL_DIR, KEEP_PLUGIN, el_guard_script, plugin_text
from gpunode.modcache.guard_hooks import (
    CONF_FILE,
    LOG_FILE,
    SCRIPT,
    STATE_FILE,
    config_text,
    guard_script,
    parse_state,
)
from gpunode.verify import analyze
from gpunode.verify.evidence import Evidence

OLD, NEW = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.11.1.el9_5.x86_64"
MOD, VER = "nvidia", "550.127.05"
_OVERLAID = ("/etc", "/usr/lib", "/usr/sbin", "/var/lib", "/var/log", "/boot")

# stand-ins for what is not on this machine (see the module's docstring)
_GRUBBY = """#!/bin/sh
case "$1" in
  --default-kernel) cat /boot/.standin-default ;;
  --set-default) [ -e "$2" ] && echo "$2" > /boot/.standin-default ;;
  *) exit 1 ;;
esac
"""
_GRUBBY_PLUGIN = """#!/bin/sh
[ "$1" = add ] || exit 0
cp "$4" "/boot/vmlinuz-$2"
u=$( . /etc/sysconfig/kernel; echo "$UPDATEDEFAULT")
[ "$u" = yes ] && grubby --set-default "/boot/vmlinuz-$2"
exit 0
"""

needs_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("kernel-install"),
    reason="needs root, unshare and systemd's kernel-install")


@pytest.mark.parametrize("form", ["tar", "deb"])
def test_the_el_script_and_plugins_are_posix_sh(form, tmp_path):
    """dash parses the script and both plugins, and shellcheck finds no warning in them (as sh)."""
    paths = [tmp_path / "kernel-guard"]
    paths[0].write_text(el_guard_script(form))
    for name in (CACHE_PLUGIN, KEEP_PLUGIN):
        paths.append(tmp_path / name)
        paths[-1].write_text(plugin_text(name))
    for path in paths:
        subprocess.run(["dash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        checked = subprocess.run(["shellcheck", "-s", "sh", "-S", "warning", *map(str, paths)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stdout


def test_the_el_side_shares_the_debian_sides_script_but_its_boot_default():
    """One script: the same config reading, module list and module cache install; only guard_boot differs."""
    deb, el = guard_script("tar"), el_guard_script("tar")
    def common(script: str) -> str:
        return script.split("\nmode=", 1)[1].split("\n# guard_boot", 1)[0]

    assert common(el) == common(deb) and "installed() {" in common(el)
    assert el.split("INSTALL=", 1)[1] == deb.split("INSTALL=", 1)[1]
    assert "grubby --set-default" in el and "grub-set-default" not in el and "grubby" not in deb


def test_converged_on_el_when_every_file_is_in_place():
    import base64

    from gpunode.steps import build_step
    from gpunode.steps.remote_file import CONTENT_PREFIX
    from tests.plan_cases import build_facts, context

    step = build_step("kernel_guard", {"cache": "/mnt/gpunode/modules"})
    files = step._files(build_facts("rhel-9", {}))
    assert list(files) == [SCRIPT, f"{INSTALL_DIR}/{CACHE_PLUGIN}", f"{INSTALL_DIR}/{KEEP_PLUGIN}", CONF_FILE]
    probe = {f"file{i}": f"present\n{mode.lstrip('0')} root root\n{CONTENT_PREFIX}"
                         f"{base64.b64encode(content.encode()).decode()}\n"
             for i, (content, mode) in enumerate(files.values())}
    case = {"kind": "kernel_guard", "os": "rhel-9", "args": {"cache": "/mnt/gpunode/modules"}, "probe": probe}
    assert step.plan(context(case, step=step)) == []


def _sandbox(tmp_path: Path, files: dict[str, tuple[str, int]], run: str) -> subprocess.CompletedProcess:
    """Run `run` (bash) in a private mount namespace with overlays on _OVERLAID and `files` (path -> text, mode)
    written into them; each plugin folder emptied first (this machine's own plugins do not run)."""
    staged = tmp_path / "files"
    setup = ["set -e"]
    for i, folder in enumerate(_OVERLAID):
        upper, work = tmp_path / f"ov{i}" / "u", tmp_path / f"ov{i}" / "w"
        upper.mkdir(parents=True)
        work.mkdir()
        setup.append(f"mount -t overlay overlay -o lowerdir={folder},upperdir={upper},workdir={work} {folder}")
    setup += ["rm -f /etc/kernel/install.d/* /usr/lib/kernel/install.d/*", "rm -rf /var/lib/dkms /var/lib/gpunode"]
    for path, (text, mode) in files.items():
        source = staged / path.lstrip("/")
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text)
        setup.append(f"mkdir -p {Path(path).parent} && cp {source} {path} && chmod {mode:o} {path}")
    script = "\n".join(setup) + "\nset +e\n" + run
    return subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, timeout=300)


def _guard_files(cache: str = "") -> dict[str, tuple[str, int]]:
    files = {SCRIPT: (el_guard_script("tar"), 0o755), CONF_FILE: (config_text("auto", "", "auto", "", cache), 0o644)}
    files.update({f"{INSTALL_DIR}/{name}": (plugin_text(name), 0o755) for name in (CACHE_PLUGIN, KEEP_PLUGIN)})
    return files


@needs_sandbox
def test_kernel_install_runs_the_cache_plugin_before_dkms_and_the_keep_plugin_after_grubby_and_dkms(tmp_path):
    """This machine's kernel-install (systemd 252) sorts ours among the vendors' names, /etc over /usr/lib, and calls
    each with `add RELEASE ENTRY-DIR IMAGE`; without dkms on the host the guard does nothing and exits 0."""
    files = _guard_files()
    for name in ("20-grubby.install", "40-dkms.install", "50-dracut.install", "92-tuned.install",
                 "99-grub-mkconfig.install"):
        files[f"/usr/lib/kernel/install.d/{name}"] = ("#!/bin/sh\nexit 0\n", 0o755)
    files["/tmp/image"] = ("not a kernel\n", 0o644)
    ran = _sandbox(tmp_path, files, f"KERNEL_INSTALL_BYPASS=0 kernel-install -v add {NEW} /tmp/image; echo rc=$?")
    calls = [line.split()[0].lstrip("+") for line in ran.stdout.splitlines() if line.startswith("+/")]
    assert calls == ["/usr/lib/kernel/install.d/20-grubby.install", f"{INSTALL_DIR}/{CACHE_PLUGIN}",
                     "/usr/lib/kernel/install.d/40-dkms.install", "/usr/lib/kernel/install.d/50-dracut.install",
                     "/usr/lib/kernel/install.d/92-tuned.install", "/usr/lib/kernel/install.d/99-grub-mkconfig.install",
                     f"{INSTALL_DIR}/{KEEP_PLUGIN}"], ran.stdout + ran.stderr
    assert f"+{INSTALL_DIR}/{CACHE_PLUGIN} add {NEW} " in ran.stdout and ran.stdout.rstrip().endswith("rc=0")


def _dkms_tree(kernel: str) -> str:
    """bash: the built and installed module of kernel `kernel` in dkms's tree, as dkms install leaves it."""
    built = f"/var/lib/dkms/{MOD}/{VER}/{kernel}/x86_64"
    return (f"mkdir -p {built}/module /lib/modules/{kernel}/extra && echo ko > {built}/module/{MOD}.ko && "
            f"cp {built}/module/{MOD}.ko /lib/modules/{kernel}/extra/ && "
            f"ln -sfn {VER}/{kernel}/x86_64 /var/lib/dkms/{MOD}/kernel-{kernel}-x86_64\n")


@needs_sandbox
@pytest.mark.extended
def test_a_kernel_without_its_module_stays_out_of_the_default_until_dkms_has_it(tmp_path):
    """dkms's real program and 40-dkms.install (GPUNODE_DKMS_SOURCE: a dkms checkout, v3.2.0 or later, `make` run):
    the new kernel has no headers, dkms's plugin cannot build and exits 0; the keep part puts the old kernel back
    as grubby's default and records why; verify-gpu reads the record; once dkms has the module a new run of the
    plugins makes the new kernel the default again (UPDATEDEFAULT=yes) and drops the record."""
    source = Path(os.environ.get("GPUNODE_DKMS_SOURCE", "/nonexistent"))
    if not (source / "dkms").is_file() or not (source / "redhat_kernel_install.d").is_file():
        pytest.skip("GPUNODE_DKMS_SOURCE is not a built dkms checkout (make)")
    files = _guard_files()
    files.update({"/usr/sbin/dkms": ((source / "dkms").read_text(), 0o755),
                  "/usr/lib/kernel/install.d/40-dkms.install": ((source / "redhat_kernel_install.d").read_text(),
                                                                0o755),
                  "/usr/lib/kernel/install.d/20-grubby.install": (_GRUBBY_PLUGIN, 0o755),
                  "/usr/sbin/grubby": (_GRUBBY, 0o755), "/etc/sysconfig/kernel": ("UPDATEDEFAULT=yes\n", 0o644),
                  f"/usr/src/{MOD}-{VER}/dkms.conf": (f'PACKAGE_NAME="{MOD}"\nPACKAGE_VERSION="{VER}"\n'
                                                      f'BUILT_MODULE_NAME[0]="{MOD}"\nDEST_MODULE_LOCATION[0]="/extra"\n'
                                                      'AUTOINSTALL="yes"\n', 0o644),
                  "/tmp/image": ("not a kernel\n", 0o644), f"/boot/vmlinuz-{OLD}": ("old\n", 0o644),
                  "/boot/.standin-default": (f"/boot/vmlinuz-{OLD}\n", 0o644)})
    run = (f"mkdir -p /var/lib/dkms/{MOD}/{VER} && ln -s /usr/src/{MOD}-{VER} /var/lib/dkms/{MOD}/{VER}/source\n"
           + _dkms_tree(OLD) +
           f"dkms status\nkernel-install add {NEW} /tmp/image; echo rc=$?\n"
           f"echo default=$(grubby --default-kernel)\necho @@state; cat {STATE_FILE}; echo @@log; cat {LOG_FILE}\n"
           + _dkms_tree(NEW) +
           f"kernel-install add {NEW} /tmp/image; echo rc=$?\necho default=$(grubby --default-kernel)\n"
           f"ls {STATE_FILE} 2>&1; tail -n 1 {LOG_FILE}\n")
    ran = _sandbox(tmp_path, files, run)
    out = ran.stdout
    assert f"{MOD}/{VER}, {OLD}, x86_64: installed" in out, out + ran.stderr
    first, second = out.split("@@state\n", 1)[1].split("@@log\n", 1)[0], out.split("@@log\n", 1)[1]
    # dkms v3.1-v3.2.1's plugin exits with dkms's status (21: no headers), and kernel-install 252 then runs no later
    # plugin: the default is kept by the cache part already; v3.2.2 and later exit 0 and the keep part runs too
    passes_failure = (source / "redhat_kernel_install.d").read_text().rstrip().endswith("exit $res")
    first_rc = "rc=21" if passes_failure else "rc=0"
    assert out.split("\n")[1] == first_rc and f"default=/boot/vmlinuz-{OLD}" in out, out + ran.stderr
    state = parse_state(first)
    assert (state["kernel"], state["missing"], state["kept"], state["boot_default"]) == (
        NEW, f"{MOD}/{VER}", OLD, f"kept: /boot/vmlinuz-{OLD}"), first
    assert f"{MOD}/{VER} not installed for {NEW}: the boot default stays at {OLD}" in second
    assert second.split("rc=")[0].count("gpunode kernel guard") == 0  # the log file, before the second run
    assert len(second.split("\nrc=")[0].splitlines()) == 1  # one log line: the keep part saw it kept, said nothing
    found = {f.id: f for f in analyze(Evidence(dkms_status=[f"{MOD}/{VER}, {OLD}, x86_64: installed"],
                                               running_kernel=OLD, next_boot_kernel=NEW, kernel_guard=state))}
    assert found["kernel-guard-kept-default"].summary == (
        f"kernel {NEW} installed without its NVIDIA module ({MOD}/{VER}); boot default kept at {OLD}")
    assert state["loader"] == "grubby" and f"grubby --set-default /boot/vmlinuz-{NEW}" in found[
        "kernel-guard-kept-default"].remedy and "dpkg" not in found["kernel-guard-kept-default"].remedy
    assert out.count("rc=0") == (1 if passes_failure else 2)
    assert f"default=/boot/vmlinuz-{NEW}" in out.rsplit("rc=0", 1)[1], out
    assert "No such file" in out.rsplit("rc=0", 1)[1]  # the record is gone
    assert out.rstrip().endswith(f"the module is installed for {NEW}: it is the boot default again (UPDATEDEFAULT=yes)")


def test_verify_names_grubby_for_the_dnf_sides_record():
    """The dnf side's record (as the extended test's run wrote it) reads as the Debian side's, its remedy grubby's."""
    record = parse_state(f"kernel={NEW}\nmissing={MOD}/{VER}\nkept={OLD}\nentry=/boot/vmlinuz-{OLD}\n"
                         f"boot_default=kept: /boot/vmlinuz-{OLD}\nloader=grubby\ntime=2026-11-29T08:33:29Z\n")
    base = {"dkms_status": [f"{MOD}/{VER}, {OLD}, x86_64: installed"], "running_kernel": OLD,
            "next_boot_kernel": NEW}
    kept = {f.id: f for f in analyze(Evidence(**base, kernel_guard=record))}["kernel-guard-kept-default"]
    assert kept.severity == "warning" and f"grubby --set-default /boot/vmlinuz-{NEW}" in kept.remedy
    assert f"kernel-devel-{NEW}" in kept.remedy and "dpkg" not in kept.remedy and "grub-editenv" not in kept.remedy
    lost = {**record, "boot_default": "unchanged: no grubby (grubby --default-kernel) on this node", "kept": ""}
    failed = {f.id: f for f in analyze(Evidence(**base, kernel_guard=lost))}["kernel-guard-default-not-kept"]
    assert failed.severity == "critical" and failed.remedy.endswith(
        "Until then, choose the boot entry of a kernel with the module (grubby --set-default).")
    assert "dkms-next-boot-kernel" in {f.id for f in analyze(Evidence(**base, kernel_guard=lost))}
