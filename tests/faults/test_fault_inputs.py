"""Fuzzed inventory and playbook values (spaces, quotes, `$()`, backticks, newlines, unicode) never reach a
shell unquoted: the commands steps build split (shlex, and a real /bin/sh where safe) into the argv they mean.

Guards: gpunode/connection/quoting.py (`q`, `join`) used by every step, the sudo wrapper in
gpunode/connection/base.py, the package-name check in gpunode/steps/packages.py, the path checks of nfs_mount,
and log_file_name (gpunode/connection/__init__.py). Replace a `q(x)` by `x` anywhere here and a case fails.

Commands are also run for real with /bin/sh in a temp folder; the random parts of values contain no ASCII
letters, so even a quoting bug can only run the harmless injections listed in INJECTIONS.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpunode.connection import log_file_name, q
from gpunode.connection.base import Connection
from gpunode.errors import GpunodeError
from gpunode.inventory import load_inventory
from gpunode.playbook import render
from gpunode.scripts import script_text
from gpunode.steps import build_step
from gpunode.steps.base import Step, StepContext
from gpunode.steps.files import LineStep
from gpunode.steps.nfs.mount import NfsMountStep
from gpunode.steps.packages import PACKAGE_SPEC
from gpunode.steps.pkgmgr import AptManager, DnfManager, Wanted
from gpunode.steps.probe import ProbeBatch, ProbeOutput
from gpunode.steps.remote_file import parse_file_probe
from tests.faults.helpers import INJECTIONS, MARKER

# no ASCII letters: random text cannot name a command even if a quote broke
SAFE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00",
                           whitelist_categories=("Nd", "P", "S", "Zs", "Lo", "Ll", "Lu"),
                           ).filter(lambda c: not ("a" <= c.lower() <= "z"))
values = st.lists(st.one_of(st.text(SAFE_CHARS, min_size=1, max_size=6), st.sampled_from(INJECTIONS)),
                  min_size=1, max_size=6).map("".join)
file_names = values.map(lambda v: v.replace("/", "_")).filter(
    lambda v: v not in (".", "..") and len(v.encode()) < 200)
contents = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def sh(command: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run a command the way the host does (`sh -c`), in a temp folder."""
    return subprocess.run(["/bin/sh", "-c", command], cwd=cwd, input=stdin, capture_output=True, timeout=30)


def ctx(probe: dict[str, str], step: Step | None = None) -> StepContext:
    """A context whose probe asked what `step` asks (by default: the sections given), as the runner's does."""
    output = ProbeOutput(probe, asked=step.probe(None) or {} if step else None)  # type: ignore[arg-type]
    return StepContext(host=None, facts=None, conn=None, check=False, probe=output)  # type: ignore[arg-type]


def probed(snippets: dict[str, str], cwd: Path) -> ProbeOutput:
    """A step's probe run for real through the probe protocol (one script, split once), in a temp folder."""
    batch = ProbeBatch([snippets])
    (output,) = batch.split(sh(batch.script(), cwd).stdout.decode("utf-8", errors="surrogateescape"))
    return output


def fresh_dir(base: Path) -> Path:
    path = base / hashlib.sha256(str(id(object())).encode() + str(len(list(base.iterdir()))).encode()).hexdigest()[:12]
    path.mkdir()
    return path


# ---- quoting and the sudo wrapper ---------------------------------------------------------------------------
@SETTINGS
@given(words=st.lists(values, max_size=5))
def test_join_round_trips_through_shlex(words):
    from gpunode.connection import join

    assert shlex.split(join(words)) == words


@SETTINGS
@given(command=values, password=st.text(min_size=8, max_size=20).filter(lambda p: p.strip()))
def test_sudo_wrapper_keeps_the_command_whole_and_the_password_off_the_command_line(command, password):
    plain = SimpleNamespace(become=True, is_root=False, become_password=None)
    wrapped, given_password = Connection.wrap(plain, command, None)  # type: ignore[arg-type]
    assert shlex.split(wrapped) == ["sudo", "-n", "-H", "--", "sh", "-c", command] and given_password is None
    secret = SimpleNamespace(become=True, is_root=False, become_password=password, sudo_prompt="@@p@@",
                             started_marker="@@s")
    wrapped, given_password = Connection.wrap(secret, command, None)  # type: ignore[arg-type]
    argv = shlex.split(wrapped)
    assert argv[:7] == ["sudo", "-S", "-p", "@@p@@", "-H", "--", "sh"] and argv[-2:] == ["gpunode-sudo", command]
    assert given_password == password and (password not in wrapped or password in command)


@SETTINGS
@given(command=values, data=st.binary(max_size=300), hidden=st.booleans())
def test_guard_wrapper_runs_the_command_whole_with_exactly_its_input(tmp_path, command, data, hidden):
    """The guard (gpunode/connection/guard.py) through a real /bin/sh: the command arrives whole (echoed back
    through printf) and reads exactly the bytes sent, however hostile either is; a hidden (sensitive) command
    travels on stdin and is not on the command line."""
    from gpunode.connection.guard import guarded

    real = f'printf "%s" {q(command)} > arg; cat > input'
    wrapper, prefix = guarded(real, len(data), "step", hidden)
    assert prefix == (real.encode() if hidden else b"")
    assert not hidden or (real not in wrapper and q(real) not in wrapper)
    data_sent = prefix + data
    argv = shlex.split(wrapper)
    process = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    process.stdin.write(data_sent)
    process.stdin.flush()
    assert process.wait(timeout=20) == 0, process.stderr.read()
    process.stdin.close()
    assert (tmp_path / "arg").read_bytes().decode(errors="surrogateescape") == command
    assert (tmp_path / "input").read_bytes() == data
    assert not (tmp_path / MARKER).exists()
    with contextlib.suppress(OSError):  # the wrapper's record folder on this machine: leave nothing behind
        Path("/run/lock/gpunode.lock.d").rmdir()


# ---- file and line: probe and atomic write, run for real -----------------------------------------------------
@SETTINGS
@given(name=file_names, content=contents, owner=values, validate=values)
def test_file_step_command_has_every_value_intact(tmp_path, name, content, owner, validate):
    path = f"/srv/{name}"
    step = build_step("file", {"path": path, "content": content, "owner": owner, "validate": validate})
    (action,) = step.plan(ctx({"file": "absent\n"}, step))
    argv = shlex.split(action.command)
    digest = hashlib.sha256(content.encode("utf-8", errors="surrogateescape")).hexdigest()
    assert argv == ["sh", "-c", script_text("atomic_write.sh"), "atomic-write", path, "", owner, "", "absent", "1",
                    validate, digest]
    assert action.stdin == content.encode("utf-8", errors="surrogateescape")
    present = ctx({"file": "present\n644 root root\nx\nbase64:"})
    (remove,) = build_step("file", {"path": path, "state": "absent"}).plan(present)
    assert shlex.split(remove.command) == ["rm", "-f", "--", path]


@SETTINGS
@given(name=file_names, old=contents, new=contents)
def test_probe_and_atomic_write_round_trip_any_name_and_content(tmp_path, name, old, new):
    assume(new != old)
    folder = fresh_dir(tmp_path)
    target = folder / name
    target.write_bytes(old.encode())
    step = build_step("file", {"path": str(target), "content": new})
    output = probed(step.probe(None), folder)
    state = parse_file_probe(output["file"])
    assert state.exists and state.content == old
    (action,) = step.plan(ctx(output))
    result = sh(action.command, folder, action.stdin)
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == new.encode()
    assert not (folder / MARKER).exists() and not (Path.cwd() / MARKER).exists()
    left = sorted(p.name for p in folder.iterdir())
    assert len(left) == 2 and name in left  # the file and its backup: no temp file
    assert sh(f"rm -f -- {q(str(target))}", folder).returncode == 0 and not target.exists()


@SETTINGS
@given(old=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=20),
                    max_size=6).map(lambda ls: "".join(line + "\n" for line in ls)),
       line=st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_line_edit_is_idempotent_and_leaves_other_lines_byte_exact(old, line):
    if "\n" in line:
        with pytest.raises(ValueError):
            LineStep(path="/etc/x.conf", line=line)
        return
    step = LineStep(path="/etc/x.conf", line=line)
    once = step.edit(old)
    assert step.edit(once) == once  # a second run changes nothing (\r, U+2028 and friends included)
    assert once.split("\n").count(line) >= 1
    kept = [ln for ln in old.split("\n")[:-1] if ln != line]
    assert [ln for ln in once.split("\n")[:-1] if ln != line] == kept


# ---- command guards, services, packages, nfs -----------------------------------------------------------------
@SETTINGS
@given(creates=file_names, removes=file_names, exists=st.booleans(), chdir=values, unless=values)
def test_command_guards_test_the_named_paths_and_nothing_else(tmp_path, creates, removes, exists, chdir, unless):
    folder = fresh_dir(tmp_path)
    if exists:
        (folder / creates).write_text("")
    step = build_step("command", {"cmd": "true", "creates": str(folder / creates), "removes": str(folder / removes)})
    out = probed(step.probe(None), folder)["guards"].split()
    assert ("creates-exists" in out) == exists
    assert ("removes-missing" in out) == (not (folder / removes).exists())
    assert not (folder / MARKER).exists()
    guarded = build_step("command", {"cmd": "run it", "chdir": chdir, "unless": unless})
    # `unless` is shell text (as `cmd`), handed to a shell whole in a here-document: on no command line
    guards = guarded.probe(None)["guards"]
    delimiter = re.search(r"<<'(GPUNODE_UNLESS_[0-9a-f]{16})'\n", guards).group(1)
    assert f"<<'{delimiter}'\n{unless}\n{delimiter}\n)" in guards
    (action,) = guarded.plan(ctx({}, guarded))
    assert action.command == f"cd {q(chdir)} || exit\nrun it"  # chdir quoted; cmd is the user's shell text


@SETTINGS
@given(name=values)
def test_service_commands_keep_the_unit_name_whole(name):
    step = build_step("service", {"name": name, "state": "started", "enabled": True})
    probe = shlex.split(step.probe(None)["unit"])
    assert probe[:4] == ["systemctl", "show", "-p", "LoadState"] and probe[probe.index("--") + 1] == name
    actions = step.plan(ctx({"unit": "LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n"}))
    enable, start = (shlex.split(a.command) for a in actions)
    assert enable == ["systemctl", "enable", "--", name]
    assert start[:4] == ["systemctl", "start", "--", name]  # then checked active: every use of the name is whole
    # then checked active: the name enters that script only quoted, exactly where a plain name would
    plain = build_step("service", {"name": "unit x", "state": "started"}).plan(
        ctx({"unit": "LoadState=loaded\nActiveState=inactive\n"}))[0].command
    assert actions[1].command == plain.replace(q("unit x"), q(name))


@SETTINGS
@given(names=st.lists(st.one_of(values, st.from_regex(r"\A[a-z0-9][a-z0-9+.-]{0,20}(=[0-9][0-9a-z.*:~+-]{0,10})?\Z")),
                      min_size=1, max_size=4))
def test_package_names_are_refused_or_passed_as_single_words(names):
    try:
        build_step("packages", {"names": names})
    except ValueError:
        # refused only when some spec is no `name` / `name=version` (an empty name or version included)
        assert any(not PACKAGE_SPEC.fullmatch(n) for n in names)
        return
    wanted = [Wanted.parse(n) for n in names]
    apt = shlex.split(AptManager().install(wanted, refresh=True, recommends=False))
    assert apt[apt.index("install") + 2:] == names
    dnf = shlex.split(DnfManager().install(wanted, refresh=False, recommends=False))
    assert dnf[dnf.index("install") + 2:] == [f"{w.name}-{w.version}" if w.version else w.name for w in wanted]
    probe = shlex.split(AptManager().probe([w.name for w in wanted])["installed"])
    start = probe.index("--") + 1
    assert probe[start:start + len(wanted)] == [w.name for w in wanted]


@SETTINGS
@given(path=values, options=values)
def test_nfs_paths_and_options_are_checked_and_quoted(path, options):
    try:
        step = NfsMountStep(server="nas.example.com", export="/data", path="/mnt/" + path, options=options)
    except ValueError:
        return
    probe = shlex.split(step._probe_command(True))
    assert probe[:2] == ["bash", "-c"] and probe[3:7] == ["nfs_mount.sh", "probe", "nas.example.com", step.path]
    assert len(step.line.split()) == 6  # spaces in the path or options are escaped inside the fstab fields
    assert not any(c in step.path for c in "'\"$`\\\n;")


# ---- inventory values through templates, and host names ------------------------------------------------------
@SETTINGS
@given(conf_dir=file_names, value=contents, host_name=values)
def test_inventory_values_reach_commands_intact(tmp_path, conf_dir, value, host_name):
    folder = fresh_dir(tmp_path)
    inventory = folder / "inv.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {host_name: {
        "ansible_host": "192.0.2.10", "conf_dir": conf_dir, "conf_value": value}}}}))
    try:
        hosts = list(load_inventory(str(inventory)).hosts.values())  # names may be trimmed or expanded (web[1:3])
    except GpunodeError:  # a refused name is refused with gpunode's own error (anything else fails the test)
        return
    assert hosts
    for host in hosts:
        assert host.vars["conf_dir"] == conf_dir and host.vars["conf_value"] == value
        args = render({"path": "/etc/{{ conf_dir }}/app.conf", "content": "{{ conf_value }}"}, host.vars)
        (action,) = build_step("file", args).plan(ctx({"file": "absent\n"}))
        assert shlex.split(action.command)[4] == f"/etc/{conf_dir}/app.conf"
        assert action.stdin == value.encode("utf-8", errors="surrogateescape")
        for name in (host.name, host_name):
            log = (folder / "logs" / log_file_name(name)).resolve()
            assert log.parent == (folder / "logs").resolve()  # a host named ../../x cannot put its log elsewhere
