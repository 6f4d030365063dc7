"""The `json` step without SSH: argument validation, the merge, and plans made from the real probe snippet run
by a local shell on real files (the planned write is run by the same shell, so the file on disk is the proof)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpunode.inventory import Host
from gpunode.steps import StepFailed, build_step
from gpunode.steps.base import StepContext
from gpunode.steps.json_merge import indent_of, merge, same
from gpunode.steps.probe import ProbeOutput
from tests.conftest import run_cli


def plan(step, check: bool = True):
    """The step's plan from what its probe prints on this machine."""
    output = {name: subprocess.run(["sh", "-c", snippet], capture_output=True, text=True).stdout
              for name, snippet in step.probe(None).items()}
    ctx = StepContext(Host(name="local", address="local"), None, None, check, ProbeOutput(output))  # type: ignore[arg-type]
    return step.plan(ctx)


def apply(actions) -> None:
    for action in actions:
        done = subprocess.run(["sh", "-c", action.command], input=action.stdin, capture_output=True)
        assert done.returncode == 0, done.stderr


def test_merge_keeps_the_users_keys_in_their_order_and_merges_objects():
    current = {"data-root": "/d", "log-opts": {"max-size": "10m"}, "debug": False}
    merged = merge(current, {"log-opts": {"max-file": "3"}, "log-level": "warn", "debug": True})
    assert list(merged) == ["data-root", "log-opts", "debug", "log-level"]
    assert merged["log-opts"] == {"max-size": "10m", "max-file": "3"} and merged["debug"] is True
    assert merge({"a": "x"}, {"a": {"b": 1}}) == {"a": {"b": 1}}  # a non-object is replaced
    assert merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}            # lists are values, replaced whole
    assert current["log-opts"] == {"max-size": "10m"}                # the input is not changed
    assert not same({"a": 1}, {"a": True}) and not same({"a": 1}, {"a": 1.0}) and same({"a": 1}, {"a": 1})


def test_indentation_is_the_files_own():
    assert indent_of('{\n    "a": 1\n}\n') == 4
    assert indent_of('{\n\t"a": 1\n}\n') == "\t"
    assert indent_of('{"a": 1}\n') == 2 and indent_of("") == 2


@pytest.mark.parametrize(("args", "message"), [
    ({"path": "etc/x.json", "set": {"a": 1}}, "absolute"),
    ({"path": "/etc/x.json"}, "needs argument"),
    ({"path": "/etc/x.json", "set": {}}, "json.set is empty"),
    ({"path": "/etc/x.json", "set": "a=1"}, "must be a mapping"),
    ({"path": "/etc/x.json", "set": {1: "a"}}, "JSON keys are strings; quote it"),
    ({"path": "/etc/x.json", "set": {"a": {"b": float("inf")}}}, "json.set.a.b: inf is not a JSON number"),
    ({"path": "/etc/x.json", "set": {"a": {1, 2}}}, "not a JSON value; quote it"),
    ({"path": "/etc/x.json", "set": {"a": 1}, "mode": 644}, "quote the mode"),
    ({"path": "/etc/x.json", "set": {"a": 1}, "merge": True}, "unknown argument 'merge'"),
])
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        build_step("json", args)


def test_a_bad_argument_in_a_playbook_is_exit_2_naming_the_line(tmp_path):
    book = tmp_path / "play.yml"
    book.write_text("steps:\n  - name: merge\n    json: {path: /etc/x.json, set: {when: 2026-01-01}}\n")
    result = run_cli("provision", "-H", "localhost", "--playbook", str(book))
    assert result.code == 2, result.output
    said = " ".join(result.stderr.split())  # the terminal width may wrap the line
    assert f"{book}:3: json.set.when: a date (2026-01-01) is not a JSON value; quote it" in said


def test_plan_writes_the_merge_then_is_converged(tmp_path: Path):
    path = tmp_path / "daemon.json"
    path.write_text('{\n    "data-root": "/var/lib/docker",\n    "log-opts": {"max-size": "10m"}\n}\n')
    step = build_step("json", {"path": str(path), "set": {"log-level": "warn", "log-opts": {"max-file": "3"}}})
    actions = plan(step)
    assert [a.summary for a in actions] == [f"update {path}"]
    assert actions[0].reason == "sets log-level, log-opts"
    assert '+    "log-level": "warn"' in actions[0].diff and '-    "log-opts": {"max-size": "10m"}' in actions[0].diff
    apply(actions)
    assert json.loads(path.read_text()) == {"data-root": "/var/lib/docker",
                                            "log-opts": {"max-size": "10m", "max-file": "3"}, "log-level": "warn"}
    assert path.read_text().startswith('{\n    "data-root"')  # the file's 4-space indentation kept
    assert len(list(tmp_path.glob("daemon.json.*.gpunode.bak"))) == 1
    assert plan(step) == []


def test_equal_json_in_another_layout_is_converged_and_not_reformatted(tmp_path: Path):
    path = tmp_path / "c.json"
    path.write_text('{"log-level":"warn","x":[1,2]}')
    assert plan(build_step("json", {"path": str(path), "set": {"log-level": "warn"}})) == []
    assert plan(build_step("json", {"path": str(path), "set": {"x": [1, 2]}})) == []
    assert len(plan(build_step("json", {"path": str(path), "set": {"x": [1, 2.0]}}))) == 1  # 2.0 is not 2


def test_a_missing_file_is_created_unless_create_is_false(tmp_path: Path):
    path = tmp_path / "sub" / "new.json"
    step = build_step("json", {"path": str(path), "set": {"a": {"b": None}}, "mode": "0600"})
    actions = plan(step)
    assert [a.summary for a in actions] == [f"create {path}"] and actions[0].reason == "new file with a"
    apply(actions)
    assert path.read_text() == '{\n  "a": {\n    "b": null\n  }\n}\n'
    assert oct(path.stat().st_mode & 0o777) == "0o600" and plan(step) == []
    with pytest.raises(StepFailed, match="does not exist \\(create is false\\)") as failed:
        plan(build_step("json", {"path": str(tmp_path / "nope.json"), "set": {"a": 1}, "create": False}))
    assert "create: true" in failed.value.fix


def test_a_converged_file_with_another_mode_gets_only_a_chmod(tmp_path: Path):
    path = tmp_path / "m.json"
    path.write_text('{"a": 1}\n')
    path.chmod(0o644)
    actions = plan(build_step("json", {"path": str(path), "set": {"a": 1}, "mode": "0600"}))
    assert [a.summary for a in actions] == [f"chmod 600 {path}"]
    apply(actions)
    assert path.read_text() == '{"a": 1}\n' and oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("text", "cause"), [
    ('{"a": 1,\n', "is not valid JSON (line 2, column 1"),
    ('["a"]\n', "holds a JSON array, not an object"),
    ('{"a": 1} trailing\n', "is not valid JSON (line 1, column 10: Extra data)"),
])
def test_a_file_that_is_not_a_json_object_fails_and_is_left_untouched(tmp_path: Path, text, cause):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(StepFailed, match="left untouched") as failed:
        plan(build_step("json", {"path": str(path), "set": {"a": 2}}))
    assert f"{path} " in failed.value.cause and cause in failed.value.cause and str(path) in failed.value.fix
    assert path.read_text() == text


def test_crlf_tabs_and_non_ascii_survive_a_merge(tmp_path: Path):
    path = tmp_path / "w.json"
    path.write_bytes('{\r\n\t"name": "café"\r\n}\r\n'.encode())
    apply(plan(build_step("json", {"path": str(path), "set": {"b": "ü"}})))
    assert path.read_bytes() == '{\r\n\t"name": "café",\r\n\t"b": "ü"\r\n}\r\n'.encode()


def test_numbers_the_user_did_not_set_are_written_back_as_they_were(tmp_path: Path):
    path = tmp_path / "conf.json"
    path.write_text('{\n  "limit": 1E5,\n  "ratio": 1.50,\n  "tiny": 2.0e-3,\n  "n": 7\n}\n')
    apply(plan(build_step("json", {"path": str(path), "set": {"debug": True}})))
    assert path.read_text() == ('{\n  "limit": 1E5,\n  "ratio": 1.50,\n  "tiny": 2.0e-3,\n  "n": 7,\n'
                                '  "debug": true\n}\n')
    assert plan(build_step("json", {"path": str(path), "set": {"limit": 100000.0}})) == []  # equal value: converged


def test_a_directory_as_the_path_is_refused_in_the_plan(tmp_path: Path):
    with pytest.raises(StepFailed, match="is a directory on the host; json.path must name a JSON file") as failed:
        plan(build_step("json", {"path": str(tmp_path), "set": {"a": 1}}))
    assert "config.json" in failed.value.fix and "free space" not in failed.value.fix


def test_a_byte_order_mark_is_refused_with_a_shell_fix_not_a_python_codec(tmp_path: Path):
    path = tmp_path / "bom file.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n')
    with pytest.raises(StepFailed, match="byte order mark") as failed:
        plan(build_step("json", {"path": str(path), "set": {"b": 2}}))
    assert "utf-8-sig" not in str(failed.value.cause) + failed.value.fix
    fix = failed.value.fix.split(": ", 1)[1].removesuffix(", then run again")
    subprocess.run(["sh", "-c", fix], check=True)  # the fix, as given, repairs the file
    assert path.read_bytes() == b'{"a": 1}\n'


def test_an_owner_or_group_the_host_does_not_know_fails_the_plan(tmp_path: Path):
    path = tmp_path / "c.json"
    for args, message in (({"owner": "no-such-user-27"}, "the user 'no-such-user-27' does not exist on the host"),
                          ({"group": "no-such-group-27"}, "the group 'no-such-group-27' does not exist on the host")):
        with pytest.raises(StepFailed, match=message):
            plan(build_step("json", {"path": str(path), "set": {"a": 1}, **args}))
        with pytest.raises(StepFailed, match=message):
            plan(build_step("file", {"path": str(path), "content": "x", **args}))
    assert plan(build_step("file", {"path": str(path), "content": "x", "owner": "root", "group": "root"}))
