"""Start-up: a command imports only what it uses.

Each check runs the console script's `main()` (`gpunode.tasks.main`: what `gpunode ...` runs, without the fast
exit that follows a `provision` and would skip this check's own report) in a fresh interpreter, from the repository
root (so an accidental `import bench` would succeed, not hide as an ImportError), then reads that interpreter's
`sys.modules`. No timings: what is measured is which modules were loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# boto3 is for the image commands, the lab and the bench for development only: never on the provision path
NEVER_ON_PROVISION = ("boto3", "botocore", "gpunode.image", "gpunode.lab", "bench")
# not needed to list or describe commands: each is loaded by the command that uses it
NOT_AT_REGISTRATION = (*NEVER_ON_PROVISION, "rich", "jinja2", "fabric", "paramiko", "tomlkit", "jsonschema",
                       "gpunode.inventory", "gpunode.steps", "gpunode.runner", "gpunode.playbook", "gpunode.verify",
                       "gpunode.facts", "gpunode.connection")
UNREACHABLE = "nobody@127.0.0.2:1"  # a loopback address that is not "local" to gpunode: nothing listens on port 1

RUN_CLI = """
import json, sys
sys.argv = ["gpunode", *json.loads(sys.argv[1])]
from gpunode.tasks import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\n@@modules " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def run_cli(*args: str) -> tuple[int, str, set[str]]:
    """`gpunode ARGS` in a fresh interpreter: (exit code, stdout + stderr, the modules it had loaded)."""
    proc = subprocess.run([sys.executable, "-c", RUN_CLI, json.dumps(args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    output, sep, tail = proc.stdout.rpartition("\n@@modules ")
    assert sep, f"the run did not finish: {proc.stdout}\n{proc.stderr}"
    result = json.loads(tail)
    return result["code"], output + proc.stderr, set(result["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of these packages (the package itself or any submodule) that were imported."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_registering_the_commands_imports_no_command_dependencies():
    code, output, modules = run_cli("provision", "--help")
    assert code == 0 and "--playbook" in output and "--skip-tags" in output, output
    assert loaded(modules, NOT_AT_REGISTRATION) == []


def test_version_and_the_command_list_import_no_command_dependencies():
    from gpunode import __version__

    code, output, modules = run_cli("--version")
    assert code == 0 and __version__ in output, output
    assert loaded(modules, NOT_AT_REGISTRATION) == []
    code, output, modules = run_cli("--list")
    assert code == 0 and "provision" in output and "build-ami" in output and "lab-up" in output, output
    assert loaded(modules, NOT_AT_REGISTRATION) == []


def test_provision_run_imports_neither_boto3_nor_the_image_lab_or_bench_code(tmp_path):
    """A whole `provision` (built-in base playbook: every step type registered, the runner, SSH, the summary)
    against a host that refuses the connection; --check, so nothing could change even if it answered."""
    code, output, modules = run_cli("provision", "-H", UNREACHABLE, "--check", "--log-dir", str(tmp_path))
    assert code == 1 and "refused the connection" in output, output
    assert {"gpunode.commands.provision", "gpunode.playbook.load", "gpunode.runner", "fabric"} <= modules  # it ran
    assert loaded(modules, NEVER_ON_PROVISION) == []


def test_provision_of_the_gpu_node_playbook_imports_no_image_code(tmp_path):
    code, output, modules = run_cli("provision", "-H", UNREACHABLE, "--check", "--playbook", "gpu-node",
                                    "--log-dir", str(tmp_path))
    assert code == 1 and "refused the connection" in output, output
    assert loaded(modules, NEVER_ON_PROVISION) == []


def test_verify_gpu_imports_neither_boto3_nor_the_image_lab_or_bench_code():
    code, output, modules = run_cli("verify-gpu", UNREACHABLE, "--json")
    assert code == 1 and "refused the connection" in output, output
    assert "gpunode.verify.checks.analyze" in modules  # the analysis was loaded: this was a real verify-gpu run
    assert loaded(modules, NEVER_ON_PROVISION) == []
    assert loaded(modules, ("rich", "jinja2", "tomlkit")) == []  # JSON output and no playbook: none of them


def test_commands_that_need_no_host_load_no_ssh_code():
    code, output, modules = run_cli("runtime-class")
    assert code == 0 and "kind: RuntimeClass" in output, output
    assert loaded(modules, ("fabric", "paramiko", "gpunode.connection.ssh", "gpunode.runner", "rich", "jinja2",
                            *NEVER_ON_PROVISION)) == []


def test_a_step_type_is_imported_when_first_used():
    """Only the step modules a playbook uses are loaded (the kinds are found by reading the modules' source);
    every kind maps to the module that declares it, the same before and after importing every step module."""
    code = (
        "import json, sys; from gpunode.steps import STEP_TYPES, build_step\n"
        "build_step('line', {'path': '/etc/x', 'line': 'a=1'}); first = sorted(sys.modules)\n"
        "kinds = sorted(STEP_TYPES); steps_loaded = sorted(m for m in sys.modules if m.startswith('gpunode.steps.'))\n"
        "where = {kind: cls.__module__ for kind, cls in STEP_TYPES.items()}\n"
        "import importlib, pkgutil, gpunode.steps as s\n"
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(s.__path__, 'gpunode.steps.')]\n"
        "every = {kind: cls.__module__ for kind, cls in STEP_TYPES.items()}\n"
        "print(json.dumps([first, kinds, steps_loaded, where, every]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, kinds, steps_loaded, where, every = json.loads(proc.stdout)
    assert "gpunode.steps.files" in first
    lazy = ("gpunode.steps.nfs.mount", "gpunode.steps.nvidia", "gpunode.steps.containers", "gpunode.steps.image",
            "gpunode.steps.kernel")
    assert loaded(set(first), lazy) == []
    assert loaded(set(steps_loaded), lazy) == []  # listing the kinds imported none of them
    from gpunode.steps.registry import declared

    assert kinds == sorted(declared()) and len(kinds) >= 18
    assert where == every == {kind: d.module for kind, d in declared().items()}


def test_provision_exits_fast_with_everything_written(tmp_path):
    """After a `provision` the console script skips the interpreter's teardown (os._exit): the exit code, the
    summary, the JSON report and the host log must all be complete anyway."""
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "gpunode", "provision", "-H", UNREACHABLE, "--check",
                           "--json-report", str(report), "--log-dir", str(tmp_path / "logs")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith(f"per-host logs: {tmp_path / 'logs'}/"), proc.stdout
    (host,) = json.loads(report.read_text())["hosts"]
    assert host["status"] == "unreachable" and "refused the connection" in host["error"]
    (log,) = (tmp_path / "logs").glob("*.log")
    assert "finished: unreachable" in log.read_text()
