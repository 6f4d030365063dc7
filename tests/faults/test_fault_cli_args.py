"""Hypothesis-generated arguments through every CLI task (the real entry point, `gpunode.tasks.main`, run
in-process for speed): each run ends with exit 0, 1 or 2 and a message, never a traceback and never the
"internal error" safety net of `main` (which would mean a bug let an exception escape).

Nothing here may touch a real host or the shared lab: host-selecting tasks get an inventory without hosts, lab
tasks only invalid tags, image builds `--validate-only`; tasks that only do heavy local work with valid input
(lab-base-image, bench, bake) are not fuzzed; image-provision always gets a spec file that does not exist.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpunode.tasks import main, ns
from tests.conftest import run_cli

SKIPPED = {"lab-base-image", "bench", "bake"}
TASKS = sorted(name.replace("_", "-") for name in ns.task_names if name.replace("_", "-") not in SKIPPED)
TRICKY = ["", "-1", "0", "1", "3", "65536", "1.5", "abc", "nodes01", "x=y", "=", "-", "--", "../..", "a b", "'",
          '"', "$(true)", "\n", "☃", "10.0.0.0/33", "ubuntu@", ":22", "0644", "all", "!x", "&y"]
values = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12), st.integers(-5, 70000).map(str))


def _options(task: str) -> list[tuple[str, bool]]:
    """(cli name, takes a value) for each option of the task."""
    found = []
    for argument in ns[task.replace("-", "_")].get_arguments():
        found.append((argument.name.replace("_", "-"), argument.kind is not bool))
    return found


@st.composite
def argvs(draw) -> list[str]:
    task = draw(st.sampled_from(TASKS))
    argv = [task]
    options = _options(task)
    for name, takes_value in draw(st.lists(st.sampled_from(options), max_size=4)) if options else []:
        if name in ("inventory", "hosts", "file", "output", "json-report", "junit", "log-dir", "spec", "dir"):
            continue  # set below: never a real file, host or folder
        if name == "tag":
            continue  # set below: never a valid tag
        if takes_value:
            argv.append(f"--{name}={draw(values)}")
        else:
            argv.append(f"--{name}")
    names = {n for n, _ in options}
    if "tag" in names:  # always: without it the default tag would start (or stop) a real lab
        argv.append(f"--tag={draw(values.filter(lambda t: not (t.isascii() and t.isalnum() and len(t) <= 6)))}")
    if "inventory" in names:
        argv.append("--inventory=empty.yml")
    if "file" in names:
        argv.append(f"--file={draw(st.sampled_from(['missing.xml', 'empty.yml', 'junk.bin']))}")
    if task == "image-provision":
        argv.append("--spec=missing.json")
    if task == "cache":  # the module cache: a folder of the test's own, never the user's
        argv += ["--dir=modcache", draw(st.sampled_from(["list", "prune", "x", "", "--"]))]
    if "validate-only" in names:
        argv.append("--validate-only")
    if task in ("facts", "verify-gpu", "collect", "mount-nfs"):
        argv.append(draw(st.sampled_from(["nohost", "", "a b", "x@y:99999", "-"])))
    if task == "nfs-volume" and draw(st.booleans()):
        argv += ["--server=1.2.3.4", "--export=/e", f"--name={draw(values)}"]
    return argv


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "empty.yml").write_text("all:\n  hosts: {}\n")
    (tmp_path / "junk.bin").write_bytes(bytes(range(256)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUNODE_BUILDS", str(tmp_path / "builds"))
    return tmp_path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_every_task_ends_with_an_exit_code_and_a_message(workdir, capsys, monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", ["gpunode", *argv])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    text = out + err
    assert code in (0, 1, 2), (argv, code, text)
    assert "Traceback" not in text and "internal error" not in text, (argv, text)
    if code:
        assert text.strip(), (argv, "failed without a message")


def test_lab_up_with_a_too_long_tag_is_a_usage_error():
    """The reported case, through the real console entry point in its own process."""
    result = run_cli("lab-up", "--tag", "nodes01")
    assert result.code == 2, result.output
    assert "--tag" in result.stderr and "1-6 letters or digits" in result.stderr and "Traceback" not in result.output
