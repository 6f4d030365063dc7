"""Issue 15 ("an Ansible user's first hour") on real lab hosts: each numbered case as the user met it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpunode.connection import ConnectOptions, connect
from gpunode.errors import ConnectError, GpunodeError
from gpunode.inventory import load_inventory
from gpunode.runner import remote_lock
from tests.conftest import REPO, host_inventory, host_iptables, run_cli

pytestmark = pytest.mark.lab  # real lab hosts: never in a `-m "not lab"` run

SHOWN = "[/etc/foo] :end: \\x1b[31m"


def provision(lab, hosts, tmp_path: Path, playbook: str, *args: str, inventory: Path | None = None,
              env: dict[str, str] | None = None, **inventory_vars):
    """Run `gpunode provision` with a playbook text; returns (cli result, JSON report or {})."""
    book = tmp_path / "play.yml"
    book.write_text(playbook)
    inventory = inventory or host_inventory(lab, hosts, tmp_path / "inv.yml", **inventory_vars)
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report", str(report),
                     "--log-dir", str(tmp_path / "logs"), *args, env=env)
    return result, json.loads(report.read_text()) if report.exists() else {}


def host_of(report: dict, name: str) -> dict:
    return next(h for h in report["hosts"] if h["host"] == name)


# ---- item 1 ------------------------------------------------------------------------------------------------------
def test_unquoted_modes_give_the_permissions_written(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    host.run_inside("rm -f /etc/t15-mode-*")
    result, _ = provision(lab, [host], tmp_path, """steps:
  - file: {path: /etc/t15-mode-a, content: "a\\n", mode: 0644}
  - file: {path: /etc/t15-mode-b, content: "b\\n", mode: 0755}
  - line: {path: /etc/t15-mode-c, line: c, create: true, mode: 0640}
  - line: {path: /etc/t15-mode-d, line: d, create: true, mode: 0600}
""")
    assert result.code == 0, result.output
    modes = host.run_inside("stat -c '%a' /etc/t15-mode-a /etc/t15-mode-b /etc/t15-mode-c /etc/t15-mode-d")
    assert modes.stdout.split() == ["644", "755", "640", "600"]


def test_a_line_already_there_still_gets_its_mode(lab, tmp_path):
    """The line is present but the file is world-readable: `mode:` is enforced as Ansible's lineinfile does
    (found by a new user: a secret's config stayed 0644)."""
    host = lab.hosts[sorted(lab.hosts)[0]]
    host.run_inside("printf 'token=x\\n' > /etc/t15-secret && chmod 0644 /etc/t15-secret")
    result, report = provision(lab, [host], tmp_path, """steps:
  - line: {path: /etc/t15-secret, line: token=x, mode: 0600}
""")
    assert result.code == 0 and report["hosts"][0]["steps"][0]["status"] == "changed", result.output
    assert host.run_inside("stat -c '%a' /etc/t15-secret").stdout.split() == ["600"]


def test_variables_refer_to_variables_and_templates_keep_their_newline(lab, tmp_path):
    """As in Ansible: a variable whose value is a template is expanded where it is used (playbook vars, an
    include's vars, inventory vars, --var), and "{{ x }}\\n" keeps its final newline (found by a new user)."""
    host = lab.hosts[sorted(lab.hosts)[0]]
    inner = tmp_path / "inner.yml"
    inner.write_text("""steps:
  - file: {path: /etc/t15-vars, content: "{{ greet }}|{{ derived }}|{{ from_inventory }}|{{ from_cli }}\\n"}
  - file: {path: /etc/t15-name, content: "{{ inventory_hostname }}\\n"}
""")
    outer = tmp_path / "outer.yml"
    outer.write_text("""vars: {derived: "d-{{ inventory_hostname }}"}
steps:
  - include: ./inner.yml
    vars: {greet: "{{ motd_text }}"}
""")
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", motd_text="hello from the inventory",
                               from_inventory="inv-{{ motd_text }}")
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(outer), "--var",
                     "from_cli={{ inventory_hostname }}!")
    assert result.code == 0, result.output
    assert (host.root / "etc/t15-vars").read_text() == \
        f"hello from the inventory|d-{host.name}|inv-hello from the inventory|{host.name}!\n"
    assert (host.root / "etc/t15-name").read_text() == f"{host.name}\n"


# ---- items 2 and 12 (must show 2) --------------------------------------------------------------------------------
def test_remote_text_is_shown_verbatim_and_junit_is_well_formed(lab, tmp_path):
    first, second = (lab.hosts[n] for n in sorted(lab.hosts)[:2])
    book = tmp_path / "play.yml"
    book.write_text(f"""steps:
  - name: "install [bold]x :end:"
    command: {{cmd: "printf '[/etc/foo] :end: \\\\033[31m\\\\n'; exit 3"}}
    when: inventory_hostname == '{first.name}'
  - name: fine
    command: {{cmd: "true"}}
""")
    inventory = host_inventory(lab, [first, second], tmp_path / "inv.yml")
    junit = tmp_path / "junit.xml"
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--junit", str(junit),
                     "--log-dir", str(tmp_path / "logs"))
    assert result.code == 1, result.output
    failure = next(line for line in result.stdout.splitlines() if line.startswith(f"{first.name} at step "))
    assert failure.startswith(f"{first.name} at step 'install [bold]x :end:': run: printf ")
    assert f"    {SHOWN}" in result.stdout.split(failure, 1)[1]  # the remote line, verbatim, in the summary
    assert "\x1b" not in result.stdout
    assert "fix:" in result.stdout and "log:" in result.stdout
    root = ET.parse(junit).getroot()  # Python's XML parser: well-formed
    for suite in root:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        assert int(suite.get("errors")) == sum(1 for c in cases if c.find("error") is not None)
        assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)
    suites = {s.get("name"): s for s in root}
    assert suites[first.name].get("failures") == "1"
    assert SHOWN in suites[first.name].find("testcase/failure").text
    assert suites[second.name].get("failures") == "0" and suites[second.name].get("skipped") == "1"


def test_undefined_variable_is_a_failed_step_everywhere(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    junit = tmp_path / "junit.xml"
    # a variable that nothing sets is refused before any host is contacted (trial of issues 26-28: it failed on every
    # host after connecting); what is undefined only on the host (an attribute the facts lack) fails the step there
    refused, _ = provision(lab, [host], tmp_path, "steps:\n  - name: render\n"
                           "    file: {path: /etc/t15-tpl, content: '{{ nope }}'}\n")
    assert refused.code == 2 and "play.yml:3" in refused.output and "-e nope=" in refused.output, refused.output
    result, report = provision(lab, [host], tmp_path, "steps:\n  - name: render\n"
                               "    file: {path: /etc/t15-tpl, content: '{{ facts.nope }}'}\n", "--junit", str(junit))
    assert result.code == 1
    steps = host_of(report, host.name)["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [("render", "failed")]
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"│ {host.name}"))
    assert row.split("│")[6].strip() == "1"  # the summary's failed column
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("1", "0")
    assert suite.find("testcase").get("name") == "render"


# ---- item 3 ------------------------------------------------------------------------------------------------------
def test_app_variables_named_user_and_port_do_not_change_the_login(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    result, _ = provision(lab, [host], tmp_path, "steps:\n  - command: {cmd: 'true'}\n", user="postgres", port=5432,
                          ansible_port=22)
    assert result.code == 0, result.output


def test_var_ansible_user_overrides_the_inventory(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    playbook = "steps:\n  - command: {cmd: 'true'}\n"
    wrong, _ = provision(lab, [host], tmp_path, playbook, ansible_user="nobody-t15")
    assert wrong.code == 1 and "authentication failed as nobody-t15" in wrong.output
    right, _ = provision(lab, [host], tmp_path, playbook, "--var", "ansible_user=gpunode", ansible_user="nobody-t15")
    assert right.code == 0, right.output


# ---- item 4 ------------------------------------------------------------------------------------------------------
def test_ini_false_is_false_in_when(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[1]]
    host.run_inside("rm -f /tmp/t15-flag")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"[lab]\n{host.name} ansible_host={host.address}\n\n[lab:vars]\nansible_user=gpunode\n"
                         f"ansible_become=true\nansible_ssh_private_key_file={lab.key_path}\n"
                         f"known_hosts={lab.known_hosts_path}\ninstall_container_toolkit=false\nkeep_backup=no\n")
    result, report = provision(lab, [host], tmp_path, """steps:
  - name: toolkit
    command: {cmd: "touch /tmp/t15-flag"}
    when: install_container_toolkit
  - name: conf
    file: {path: /etc/t15-bool.conf, content: "x\\n", backup: "{{ keep_backup }}"}
""", inventory=inventory)
    assert result.code == 0, result.output
    assert [s["status"] for s in host_of(report, host.name)["steps"]][0] == "skipped"
    assert host.run_inside("test -e /tmp/t15-flag").returncode == 1


# ---- items 5 and 6 -----------------------------------------------------------------------------------------------
UNIT_PLAYBOOK = """steps:
  - name: unit
    file:
      path: /etc/systemd/system/t15-echo.service
      content: "[Service]\\nEnvironment=T15={{ value }}\\nExecStart=/bin/sleep infinity\\n"
    notify: restart t15-echo
handlers:
  - name: restart t15-echo
    service: {name: t15-echo, state: restarted}
"""


def test_a_changed_unit_is_reloaded_before_its_restart(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[1]]
    for value in ("one", "two"):
        result, _ = provision(lab, [host], tmp_path, UNIT_PLAYBOOK, "--var", f"value={value}")
        assert result.code == 0, result.output
        shown = host.run_inside("systemctl show -p Environment -p ActiveState -p NeedDaemonReload t15-echo")
        assert f"Environment=T15={value}" in shown.stdout  # what systemd itself runs
        assert "ActiveState=active" in shown.stdout and "NeedDaemonReload=no" in shown.stdout
    dropin, _ = provision(lab, [host], tmp_path, """steps:
  - file:
      path: /etc/systemd/system/t15-echo.service.d/t15.conf
      content: "[Service]\\nEnvironment=T15=drop-in\\n"
    notify: restart
handlers:
  - name: restart
    service: {name: t15-echo, state: restarted}
""")
    assert dropin.code == 0, dropin.output
    assert "Environment=T15=drop-in" in host.run_inside("systemctl show -p Environment t15-echo").stdout
    reload, _ = provision(lab, [host], tmp_path, "steps:\n  - service: {name: t15-echo, daemon_reload: true}\n")
    assert reload.code == 0, reload.output


def test_started_means_active_and_a_dying_unit_shows_its_journal(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[1]]
    playbook = """steps:
  - file:
      path: /etc/systemd/system/t15-dies.service
      content: "[Service]\\nExecStart=/bin/sh -c 'echo t15-dying-now; exit 3'\\n"
  - service: {name: t15-dies, state: started}
"""
    for _ in range(2):  # not success on the second run either
        result, report = provision(lab, [host], tmp_path, playbook)
        assert result.code == 1, result.output
        error = host_of(report, host.name)["error"]
        assert "t15-dies is failed" in error and "t15-dying-now" in error, error


# ---- item 7 ------------------------------------------------------------------------------------------------------
def test_notified_handlers_run_after_a_failure_and_unrun_ones_are_listed(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    host.run_inside("rm -f /tmp/t15-handler-ran /etc/t15-h.conf")
    result, report = provision(lab, [host], tmp_path, """steps:
  - name: config
    file: {path: /etc/t15-h.conf, content: "x\\n"}
    notify: [mark, broken]
  - name: later step
    command: {cmd: "exit 4"}
handlers:
  - name: mark
    command: {cmd: "date > /tmp/t15-handler-ran"}
  - name: broken
    command: {cmd: "true"}
    when: no_such_variable
""")
    assert result.code == 1
    outcome = host_of(report, host.name)
    assert outcome["failed_step"] == "later step" and "exit 4" in outcome["error"]
    assert host.run_inside("test -s /tmp/t15-handler-ran").returncode == 0
    assert "handlers notified but not run: broken" in outcome["notes"]
    assert f"{host.name}: handlers notified but not run: broken" in result.stdout


def test_check_mode_lists_the_handlers_that_would_run(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    result, report = provision(lab, [host], tmp_path, UNIT_PLAYBOOK.replace("t15-echo", "t15-check"), "--check",
                               "--var", "value=x")
    assert result.code == 0, result.output
    assert f"{host.name}: handlers that would run: restart t15-check" in result.stdout


# ---- item 8 ------------------------------------------------------------------------------------------------------
LOCAL_REPO = r"""set -e
rm -f /etc/apt/sources.list.d/* /etc/apt/sources.list
mkdir -p /opt/t15repo/pkg/DEBIAN
printf 'Package: t15-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: t15 <t15@example.invalid>\n' \
  > /opt/t15repo/pkg/DEBIAN/control
echo 'Description: t15' >> /opt/t15repo/pkg/DEBIAN/control
dpkg-deb --build /opt/t15repo/pkg /opt/t15repo/t15-hello_1.0_all.deb >/dev/null
cd /opt/t15repo
{ cat pkg/DEBIAN/control; echo "Filename: ./t15-hello_1.0_all.deb"; echo "Size: $(stat -c %s t15-hello_1.0_all.deb)";
  echo "SHA256: $(sha256sum < t15-hello_1.0_all.deb | cut -d' ' -f1)"; } > Packages
mkdir -p /var/lib/apt/lists && touch /var/lib/apt/lists/t15_dists_fresh_Packages /var/lib/apt/lists
"""


def test_package_lists_are_refreshed_when_sources_changed_in_the_run(lab, fresh_host, tmp_path):
    made = fresh_host.run_inside(LOCAL_REPO)
    assert made.returncode == 0, made.stderr
    result, report = provision(lab, [fresh_host], tmp_path, """steps:
  - file: {path: /etc/apt/sources.list.d/t15.list, content: "deb [trusted=yes] file:/opt/t15repo ./\\n"}
  - packages: {names: [t15-hello]}
""")
    assert result.code == 0, result.output
    assert fresh_host.run_inside("dpkg -s t15-hello").returncode == 0
    install = host_of(report, fresh_host.name)["steps"][1]["actions"][0]
    assert "package sources changed in this run" in install["reason"]


def test_a_full_disk_gets_a_disk_space_fix(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    result, report = provision(lab, [host], tmp_path, "steps:\n  - command: {cmd: \"echo \\\"E: You don't have "
                               "enough free space in /var/cache/apt/archives/.\\\" >&2; exit 100\"}\n")
    assert result.code == 1
    fix = host_of(report, host.name)["fix"]
    assert "out of disk space" in fix and "package names" not in fix


# ---- item 9 ------------------------------------------------------------------------------------------------------
def test_line_does_not_create_a_mistyped_path(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    result, report = provision(lab, [host], tmp_path, "steps:\n  - line: {path: /etc/t15-typo.conf, line: a=1}\n")
    assert result.code == 1 and "create" in host_of(report, host.name)["fix"]
    assert host.run_inside("test -e /etc/t15-typo.conf").returncode == 1


# ---- item 10 -----------------------------------------------------------------------------------------------------
def test_verbose_streams_output_lines_as_they_come_and_so_does_the_log(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    host.run_inside("rm -f /tmp/t15-go")
    book = tmp_path / "play.yml"
    book.write_text("steps:\n  - command: {cmd: 'echo t15-first-line; i=0; while [ ! -e /tmp/t15-go ] && "
                    "[ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo t15-second-line'}\n")
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    logs = tmp_path / "logs"
    process = subprocess.Popen([sys.executable, "-m", "gpunode", "provision", "-i", str(inventory), "--playbook",
                                str(book), "-v", "--log-dir", str(logs)], cwd=REPO, stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        seen = []
        for line in process.stdout:  # the command is still waiting for /tmp/t15-go while we read this
            seen.append(line)
            if "t15-first-line" in line:
                break
        assert any("| t15-first-line" in line for line in seen), seen
        assert "t15-second-line" not in "".join(seen)
        assert "t15-first-line" in (logs / f"{host.name}.log").read_text()  # the log has it already, too
        host.run_inside("touch /tmp/t15-go")
        rest = process.stdout.read()
        assert process.wait(timeout=120) == 0, rest
        assert "t15-second-line" in rest
    finally:
        if process.poll() is None:
            process.kill()


# ---- item 14 -----------------------------------------------------------------------------------------------------
def test_a_lock_file_of_another_user_is_not_blamed_on_another_run(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    host.run_inside("rm -f /run/lock/gpunode.lock /run/lock/gpunode.lock.owner; touch /run/lock/gpunode.lock; "
                    "chmod 644 /run/lock/gpunode.lock")
    try:
        result, report = provision(lab, [host], tmp_path, "steps:\n  - command: {cmd: 'true'}\n",
                                   ansible_become=False)
    finally:
        host.run_inside("rm -f /run/lock/gpunode.lock")
    error = host_of(report, host.name)["error"]
    assert result.code == 1 and "another gpunode run" not in error
    assert "belongs to another user" in error and "become" in host_of(report, host.name)["fix"]


def test_two_inventory_names_for_one_machine_are_named_as_such(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[2]]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", extra_hosts={"alias-t15": host.address})
    hosts = load_inventory(inventory).hosts
    first = connect(hosts[host.name], ConnectOptions())
    second = connect(hosts["alias-t15"], ConnectOptions())
    first.open()
    held = remote_lock.acquire(first)
    try:
        with pytest.raises(GpunodeError) as info:
            remote_lock.acquire(second)
        assert "already being provisioned by this same run as " + host.name in info.value.cause
        assert "another gpunode run" not in info.value.cause
    finally:
        held.release()
        first.close()
        second.close()


# ---- item 15 -----------------------------------------------------------------------------------------------------
def test_fstab_only_nfs4_checks_the_export_before_writing(lab, fresh_host, nfs_server, tmp_path):
    from gpunode.lab.nfs import NFS_INDEX

    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    before = fresh_host.run_inside("cat /etc/fstab").stdout
    args = ["mount-nfs", fresh_host.name, "-i", str(inventory), "--server", lab.network.address(NFS_INDEX),
            "--path", "/mnt/t15", "--nfs-version", "4.1", "--fstab-only"]
    wrong = run_cli(*args, "--export", "/does-not-exist", "--log-dir", str(tmp_path / "logs"))
    assert wrong.code == 1 and "does not export /does-not-exist; it exports: /export" in wrong.output, wrong.output
    assert fresh_host.run_inside("cat /etc/fstab").stdout == before
    right = run_cli(*args, "--export", "/export", "--log-dir", str(tmp_path / "logs"))
    assert right.code == 0, right.output
    assert "/mnt/t15" in fresh_host.run_inside("cat /etc/fstab").stdout


# ---- item 16 -----------------------------------------------------------------------------------------------------
def test_a_missing_key_file_is_named_at_once(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    result, report = provision(lab, [host], tmp_path, "steps:\n  - command: {cmd: 'true'}\n",
                               ansible_ssh_private_key_file=str(tmp_path / "missing.pem"))
    outcome = host_of(report, host.name)
    assert result.code == 1 and outcome["status"] == "unreachable"
    assert outcome["error"] == f"the SSH private key file {tmp_path / 'missing.pem'} does not exist"
    assert "attempts" not in outcome["error"] and "network" not in outcome["fix"]


def ssh_dropped(lab, host):
    """Drop SSH packets to the host inside its network namespace: connections time out instead of failing."""
    return host_iptables(lab, host, "INPUT", "-p", "tcp", "--dport", "22", "-j", "DROP")


def test_refused_and_timed_out_connections_are_told_apart(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    inventory = load_inventory(host_inventory(lab, [host], tmp_path / "inv.yml", ansible_port=2)).hosts
    options = ConnectOptions(connect_timeout=2, retries=1)
    with pytest.raises(ConnectError) as refused:
        connect(inventory[host.name], options).open()
    assert "refused the connection" in refused.value.cause and "port" in refused.value.fix
    inventory = load_inventory(host_inventory(lab, [host], tmp_path / "inv2.yml")).hosts
    with ssh_dropped(lab, host), pytest.raises(ConnectError) as dropped:
        connect(inventory[host.name], options).open()
    assert "(connection timed out)" in dropped.value.cause and "firewall" in dropped.value.fix


# ---- item 17 -----------------------------------------------------------------------------------------------------
def test_verify_gpu_on_an_unreachable_host_says_unreachable(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml", ansible_port=2)
    result = run_cli("verify-gpu", host.name, "-i", str(inventory))
    assert result.code == 1 and "UNREACHABLE" in result.stdout and "NOT healthy" not in result.stdout


def test_strict_host_key_checking_no_is_honoured_on_first_use(lab, tmp_path):
    host = lab.hosts[sorted(lab.hosts)[0]]
    home = tmp_path / "home"
    home.mkdir()
    book = tmp_path / "play.yml"
    book.write_text("steps:\n  - command: {cmd: 'true'}\n")
    base = {"ansible_user": "gpunode", "ansible_become": True, "ansible_ssh_private_key_file": str(lab.key_path)}

    def run(**extra):
        inventory = tmp_path / "inv.yml"
        inventory.write_text(json.dumps({"all": {"hosts": {host.name: {"ansible_host": host.address, **base,
                                                                        **extra}}}}))
        return run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--log-dir",
                       str(tmp_path / "logs"), env={"HOME": str(home)})

    unknown = run()
    assert unknown.code == 1 and "host key" in unknown.output.lower()
    trusted = run(ansible_ssh_common_args="-o StrictHostKeyChecking=no")
    assert trusted.code == 0, trusted.output
    assert host.address in (home / ".config" / "gpunode" / "known_hosts").read_text()

