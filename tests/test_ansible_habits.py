"""Issue 15 ("an Ansible user's first hour") without hosts: values read as Ansible reads them, text shown as it is.

The tests that need a host are in test_lab_ansible_habits.py.
"""

from __future__ import annotations

import errno
import io
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

import paramiko
import pytest
from rich.console import Console

from gpunode.errors import UsageError
from gpunode.inventory import load_inventory
from gpunode.playbook import evaluate, load_playbook
from gpunode.report.junit import junit_xml
from gpunode.report.live import LiveEvents
from gpunode.report.model import HostOutcome, RunResult, StepOutcome
from gpunode.report.summary import print_summary
from gpunode.steps import build_step
from tests.conftest import REPO, run_cli

NASTY = "[/etc/foo] :end: \x1b[31m"
SHOWN = "[/etc/foo] :end: \\x1b[31m"   # control bytes are shown as escapes, everything else as written


def recording_console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None, emoji=False, highlight=False)


# ---- item 1: modes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "value", "bits"), [
    ("file", 420, "644"),      # `mode: 0644` unquoted: YAML 1.1 reads the integer 420 == 0o644
    ("file", 493, "755"),      # `mode: 0755`
    ("line", 416, "640"),      # `mode: 0640`
    ("line", 384, "600"),      # `mode: 0600` (was "internal error: ValueError")
    ("file", "0644", "644"),
    ("line", "750", "750"),
])
def test_an_integer_mode_means_the_bits_yaml_parsed(kind, value, bits):
    args = {"path": "/etc/x", "mode": value} | ({"line": "a=1"} if kind == "line" else {})
    assert build_step(kind, args).mode == bits


def test_yaml_unquoted_modes_load_as_the_permission_bits(tmp_path):
    book = tmp_path / "modes.yml"
    book.write_text("steps:\n  - file: {path: /etc/a, content: x, mode: 0644}\n"
                    "  - line: {path: /etc/b, line: x, create: true, mode: 0640}\n")
    steps = load_playbook(book).steps
    assert [build_step(s.kind, s.args).mode for s in steps] == ["644", "640"]


def test_a_decimal_looking_mode_is_refused_with_the_fix(tmp_path):
    book = tmp_path / "decimal.yml"
    book.write_text("steps:\n  - file: {path: /etc/a, content: x, mode: 644}\n")
    with pytest.raises(UsageError) as info:
        load_playbook(book)
    assert "decimal.yml:2" in str(info.value) and "quote the mode, e.g. '0644'" in str(info.value)


# ---- item 4: one truthiness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("word", ["false", "False", "no", "0", "off", "n"])
def test_false_words_are_false_in_when_and_boolean_arguments(word):
    assert evaluate("flag", {"flag": word}) is False
    assert build_step("file", {"path": "/etc/x", "backup": word}).backup is False


@pytest.mark.parametrize("word", ["true", "yes", "1", "on"])
def test_true_words_are_true(word):
    assert evaluate("flag", {"flag": word}) is True
    assert build_step("file", {"path": "/etc/x", "backup": word}).backup is True


def test_other_strings_keep_python_truthiness():
    assert evaluate("name", {"name": "gpu-1"}) is True
    assert evaluate("name", {"name": ""}) is False


# ---- item 9 -----------------------------------------------------------------------------------------------------
def test_line_does_not_create_missing_files_by_default():
    assert build_step("line", {"path": "/etc/x", "line": "a"}).create is False


# ---- item 3 -----------------------------------------------------------------------------------------------------
def test_var_ansible_user_changes_the_login(tmp_path):
    from gpunode.inventory.connvars import with_extra_vars

    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[app]\nweb1 ansible_host=192.0.2.1 ansible_user=ubuntu user=postgres\n")
    host = load_inventory(inventory).hosts["web1"]
    assert host.user == "ubuntu"
    moved = with_extra_vars(host, {"ansible_user": "admin", "ansible_port": 2200})
    assert (moved.user, moved.port, moved.address) == ("admin", 2200, "192.0.2.1")
    assert with_extra_vars(host, {"driver_branch": 550}) is host


# ---- item 2 and 12: text printed verbatim, JUnit well-formed ----------------------------------------------------
def nasty_result() -> RunResult:
    bad = HostOutcome("gpu-[1]", status="failed", error=f"install [bold]x failed: {NASTY}",
                      fix="see [/etc/foo] :end:", failed_step="install [bold]x", log_path="/tmp/[x].log",
                      steps=[StepOutcome("install [bold]x", "command", "failed", message=NASTY)])
    return RunResult("p.yml", False, [bad, HostOutcome("ok-host", steps=[StepOutcome("s", "command", "ok")])])


def test_summary_prints_remote_and_user_text_verbatim():
    console = recording_console()
    print_summary(nasty_result(), console)
    text = console.file.getvalue()
    assert f"gpu-[1] at step 'install [bold]x': install [bold]x failed: {SHOWN}" in text
    assert "fix: see [/etc/foo] :end:" in text and "log: /tmp/[x].log" in text
    assert "\x1b" not in text  # a remote colour code cannot repaint the terminal


def test_live_table_shows_names_verbatim_and_the_time_ticks():
    events = LiveEvents(["gpu-[1]"], recording_console())
    events.host_started("gpu-[1]")
    events.step_started("gpu-[1]", "install [bold]x :end:")
    events.rows["gpu-[1]"]["started"] -= 20  # as if the host had started 20 s ago; no waiting
    console = recording_console()
    console.print(events.live.get_renderable())
    text = console.file.getvalue()
    assert "gpu-[1]" in text and "install [bold]x :end:" in text
    assert "20s" in text  # the table is rebuilt on each refresh, not frozen at the last event


def test_junit_is_well_formed_and_its_counts_match_its_elements():
    result = nasty_result()
    result.hosts.append(HostOutcome("gone", status="unreachable", error=f"no route {NASTY}"))
    template = HostOutcome("tpl", status="failed", error="p.yml:3: 'nope' is undefined", failed_step="render",
                           steps=[StepOutcome("render", "file", "failed", message="p.yml:3: 'nope' is undefined")])
    result.hosts.append(template)
    root = ET.fromstring(junit_xml(result).split("\n", 1)[1])
    for suite in root:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        assert int(suite.get("errors")) == sum(1 for c in cases if c.find("error") is not None)
    suites = {s.get("name"): s for s in root}
    assert suites["gpu-[1]"].find("testcase/failure").get("message") == SHOWN
    assert suites["tpl"].get("failures") == "1" and suites["tpl"].get("errors") == "0"
    assert suites["tpl"].find("testcase").get("name") == "render"


# ---- item 8: disk space -----------------------------------------------------------------------------------------
def test_a_full_disk_gets_a_disk_space_fix():
    from gpunode.steps.base import failure_fix

    output = "E: You don't have enough free space in /var/cache/apt/archives/."
    assert "out of disk space" in failure_fix(output) and "apt-get clean" in failure_fix(output)
    assert failure_fix("E: Unable to locate package nope") == ""


# ---- item 16: one classification --------------------------------------------------------------------------------
def test_connection_failures_are_told_apart(tmp_path):
    from gpunode.connection.failures import classify, key_file_failure

    missing = key_file_failure(str(tmp_path / "nope.pem"))
    assert missing and missing.kind == "key-file" and not missing.retry and "does not exist" in missing.cause
    refused = paramiko.ssh_exception.NoValidConnectionsError(
        {("10.0.0.1", 22): OSError(errno.ECONNREFUSED, "Connection refused")})
    assert classify(refused, "10.0.0.1", 22, 10).kind == "refused"
    assert classify(TimeoutError("timed out"), "10.0.0.1", 22, 10).kind == "timeout"
    assert classify(socket.gaierror(-2, "Name or service not known"), "nope.invalid", 22, 10).kind == "dns"
    unreachable = paramiko.ssh_exception.NoValidConnectionsError(
        {("10.0.0.1", 22): OSError(errno.EHOSTUNREACH, "No route to host")})
    assert classify(unreachable, "10.0.0.1", 22, 10).kind == "unreachable"


# ---- item 17: the small ones ------------------------------------------------------------------------------------
def test_strict_host_key_checking_off_means_trust_on_first_use(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    a: {ansible_ssh_common_args: '-o StrictHostKeyChecking=no'}\n"
                         "    b: {ansible_host_key_checking: false}\n    c: {}\n")
    hosts = load_inventory(inventory).hosts
    assert [hosts[n].accept_new_host_keys for n in "abc"] == [True, True, False]


def test_graph_honours_limit(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\nnode1\nnode2\n\n[cpu]\nweb1\n")
    result = run_cli("inventory", "-i", str(inventory), "--graph", "--limit", "node1")
    assert result.code == 0, result.output
    assert "node1" in result.stdout and "node2" not in result.stdout and "@cpu" not in result.stdout


def test_an_undefined_child_group_is_named_not_blamed_on_limit(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[cluster:children]\ngpus\n")
    result = run_cli("provision", "-i", str(inventory))
    assert result.code == 2 and "--limit" not in result.output
    assert "the inventory has no hosts; groups without hosts: cluster, gpus" in result.output


@pytest.mark.parametrize("forks", ["0", "-1", "x"])
def test_forks_below_one_are_refused(forks):
    result = run_cli("provision", "-H", "192.0.2.1", "-f", forks)
    assert result.code == 2 and "Traceback" not in result.output
    assert "--forks" in result.output and "invalid literal" not in result.output  # issue 27: `-f x` named int()


def test_a_closed_pipe_ends_quietly(tmp_path):
    inventory = tmp_path / "big.ini"
    inventory.write_text("[many]\n" + "".join(f"node{i} ansible_host=192.0.2.{i % 250}\n" for i in range(3000)))
    pipe = subprocess.run(f"{sys.executable} -m gpunode inventory -i {inventory} --list | head -1", shell=True,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert pipe.stdout == "{\n"
    assert "Traceback" not in pipe.stderr and "BrokenPipe" not in pipe.stderr, pipe.stderr


def test_check_mode_summary_lists_handlers_that_would_run():
    host = HostOutcome("a", status="would-change", notes=["handlers that would run: restart docker"],
                       steps=[StepOutcome("s", "file", "would-change")])
    console = recording_console()
    print_summary(RunResult("p.yml", True, [host]), console, show_diffs=False)
    assert "a: handlers that would run: restart docker" in console.file.getvalue()



# ---- items 5 and 8: what a written file means for later steps ---------------------------------------------------
@pytest.mark.parametrize(("path", "reload", "refresh"), [
    ("/etc/systemd/system/app.service", True, False),
    ("/etc/systemd/system/docker.service.d/override.conf", True, False),
    ("/etc/systemd/journald.conf", False, False),         # a daemon's config, not a unit
    ("/etc/apt/sources.list.d/nvidia.list", False, True),
    ("/usr/share/keyrings/nvidia.gpg", False, True),
    ("/etc/docker/daemon.json", False, False),
])
def test_written_files_mark_what_later_steps_must_do(path, reload, refresh):
    from gpunode.steps.base import StepContext

    ctx = StepContext(None, None, None, False)  # type: ignore[arg-type]
    ctx.wrote(path)
    assert ctx.state.daemon_reload_pending is reload
    assert ctx.state.package_sources_changed is refresh


def test_inventory_hints_keep_their_brackets(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu nodes]\nnode1\n")
    result = run_cli("inventory", "-i", str(inventory), "--list")
    assert result.code == 2
    assert "write [group], [group:vars] or [group:children] with no spaces inside the brackets" in result.stderr


def test_the_bool_filter_reads_words_like_ansible():
    assert evaluate("flag | bool and other", {"flag": "false", "other": True}) is False
    assert evaluate("flag | bool and other", {"flag": "yes", "other": True}) is True
    assert evaluate("name | bool", {"name": "gpu-1"}) is False  # as Ansible: only true words are true


def test_a_misspelt_false_in_when_is_refused_not_counted_as_true():
    from gpunode.playbook import TemplateError

    for typo in ("flase", "Fasle", "ture", "treu", "fals"):
        with pytest.raises(TemplateError, match="looks like a misspelt true or false"):
            evaluate("flag", {"flag": typo})
    assert evaluate("flag", {"flag": "false"}) is False and evaluate("name", {"name": "tree"}) is True
