"""`image-provision`: what Packer's shell-local provisioner runs against the build instance.

The playbook (exactly what `gpunode provision` gives a host, reboots included), then an inspection, verify-gpu when
the instance has NVIDIA GPUs, then playbooks/image-finalize.yml (image_cleanup + image_validate) on one connection;
qemu builds end with gpunode powering the VM off.
Exit 0 only when all of it passed; the JSON report says which step failed otherwise.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from gpunode.app.verify import VerifyOptions, verify_host
from gpunode.connection import ConnectOptions, log_file_name
from gpunode.errors import GpunodeError
from gpunode.image.inspect import inspect_host
from gpunode.image.keys import public_key_line
from gpunode.image.poweroff import wait_until_powered_off
from gpunode.image.report import BuildReport
from gpunode.image.spec import BuildSpec
from gpunode.inventory import Host
from gpunode.playbook import Playbook, builtin_path, load_playbook
from gpunode.report.live import PlainEvents
from gpunode.report.model import RunResult
from gpunode.report.summary import print_summary
from gpunode.report.text import say
from gpunode.runner.run import RunOptions, run_playbook
from gpunode.steps.image import ALL
from gpunode.verify import Expectations

FINALIZE = builtin_path("image-finalize")  # playbooks/image-finalize.yml, shipped in the wheel


def build_host(spec: BuildSpec, address: str, port: int, user: str) -> Host:
    """The build instance as a host: the build's key, sudo unless root, a per-build known_hosts."""
    key = spec.key_file
    if not key:  # the builder made the key pair: the template saved build.SSHPrivateKey (0600) for us
        packer_key = Path(spec.build_dir) / "packer_key"
        if not packer_key.is_file() or "PRIVATE KEY" not in packer_key.read_text():
            raise GpunodeError("no SSH key for the build instance", step="connect",
                               fix="pass --ssh-key, or use a builder that hands its key to provisioners "
                               "(build.SSHPrivateKey)")
        key = str(packer_key)
    return Host(name="build-instance", address=address, port=port, user=user, key_file=key,
                become=user != "root", known_hosts=str(spec.known_hosts))


def image_provision(spec_path: str, address: str, port: int, user: str) -> int:
    """Run every phase; write the report whatever happens. Returns the exit code (0 ok, 1 failed)."""
    started = time.monotonic()
    spec = BuildSpec.read(spec_path)
    # Trust on first use, recorded per build: a fresh instance's key is new by definition and must not end up in
    # the user's own known_hosts. Reconnections after a reboot are verified against it.
    os.environ["GPUNODE_KNOWN_HOSTS"] = str(spec.known_hosts)
    report = BuildReport(host=f"{user}@{address}:{port}", playbook=spec.playbook)
    try:
        _phases(spec, build_host(spec, address, port, user), report)
    except GpunodeError as exc:
        report.ok, report.error, report.fix = False, exc.cause, exc.fix
        report.failed_step = report.failed_step or exc.step or report.phase
    finally:
        report.seconds = round(time.monotonic() - started, 1)
        report.write(spec.report_path)
    if report.ok:
        say(f"gpunode: the build instance is provisioned, verified, cleaned and validated in {report.seconds}s")
        return 0
    say(f"gpunode: FAILED at step '{report.failed_step}' ({report.phase}): {report.error}")
    return 1


def _phases(spec: BuildSpec, host: Host, report: BuildReport) -> None:
    options = ConnectOptions(accept_new_host_keys=True, log_dir=spec.log_dir, retries=5)
    book = load_playbook(spec.playbook)
    report.playbook_sha256 = book.sha256
    report.log = str(spec.log_dir / log_file_name(host.name))
    if not run_phase(book, host, spec.variables, options, report, "provision"):
        return
    report.phase = "inspect"
    info = inspect_host(host, options)
    report.image = info.to_dict()
    report.phase = "verify-gpu"
    if not verify_phase(spec.verify, spec.expect_gpus, host, options, info.gpu_count, report):
        return
    finalize = load_playbook(spec.finalize_playbook or FINALIZE)
    variables = finalize_vars(public_key_line(host.key_file or ""), spec.cleanup, spec.min_free_gb,
                              spec.require_driver, power_off=spec.power_off, ecs_agent=spec.ecs_agent)
    report.phase = "finalize"
    if not run_phase(finalize, host, variables, options, report, "finalize"):
        return
    if spec.power_off:
        report.phase = "power off"
        seconds = wait_until_powered_off(host)
        say(f"gpunode: the build VM powered off ({seconds:.0f}s after the last step)")
    report.phase, report.ok = "done", True


def finalize_vars(public_key: str | None, cleanup: list[str] | None, min_free_gb: float,
                  require_driver: bool, power_off: bool = False, ecs_agent: bool = False) -> dict:
    """Variables for playbooks/image-finalize.yml; without a known key there is no build key to remove."""
    categories = list(ALL) if cleanup is None else list(cleanup)
    if not public_key:
        categories = [c for c in categories if c != "build-key"]
    return {"build_public_key": public_key, "cleanup_categories": categories, "min_free_gb": min_free_gb,
            "require_driver": require_driver, "power_off": power_off, "ecs_agent": ecs_agent}


def run_phase(book: Playbook, host: Host, variables: dict, options: ConnectOptions, report: BuildReport,
              phase: str) -> bool:
    """Run a playbook on the one host (plain output, summary); False when it failed (the report says where)."""
    say(f"gpunode: {phase}: {book.path} on {report.host}")
    result: RunResult = run_playbook(book, [host], RunOptions(forks=1, extra_vars=variables, connect=options),
                                     PlainEvents(verbose=False))
    print_summary(result)
    report.runs[phase] = result.to_dict()
    outcome = result.hosts[0]
    if outcome.failed:
        report.failed_step = outcome.failed_step or phase
        report.error, report.fix = outcome.error, outcome.fix
        return False
    return True


def verify_phase(mode: str, expect_gpus: int | None, host: Host, options: ConnectOptions, gpu_count: int,
                 report: BuildReport) -> bool:
    """verify-gpu must pass on a GPU instance (or on any, with mode always); False when it did not."""
    if mode == "never" or (mode == "auto" and gpu_count == 0):
        why = "skipped (verify: never)" if mode == "never" else "not run: no NVIDIA GPU on the instance"
        report.verify = {"ran": False, "healthy": None, "summary": why, "findings": []}
        say(f"gpunode: verify-gpu {why}")
        return True
    say("gpunode: verify-gpu on the build instance")
    result = verify_host(host, VerifyOptions(Expectations(expect_gpus, None, None), None), options)
    critical = [f for f in result["findings"] if f["severity"] == "critical"]
    gpus = result.get("gpus", [])
    found = f"{len(gpus)}x {gpus[0]['name']}" if gpus else "no GPU visible"
    summary = f"{'healthy' if result['healthy'] else 'NOT healthy'}: {found}, driver " \
              f"{result.get('driver_version') or '-'}, CUDA {result.get('cuda_version') or '-'}"
    report.verify = {"ran": True, "healthy": result["healthy"], "summary": summary,
                     "findings": [f"{f['severity']} {f['id']}: {f['summary']}" for f in result["findings"]]}
    if result.get("cuda_version"):
        report.image["cuda_driver"] = result["cuda_version"]  # the newest CUDA the driver supports
    say(f"gpunode: verify-gpu {summary}")
    if not result["healthy"]:
        report.failed_step = "verify-gpu"
        report.error = "; ".join(f"{f['id']}: {f['summary']}" for f in critical) or "the GPU stack is not healthy"
        report.fix = "; ".join(f["remedy"] for f in critical if f.get("remedy")) or "see the findings above"
        return False
    return True
