"""Verifying a host: facts and GPU evidence in one exec, the container test, the findings (verify-gpu, image builds)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import ConnectOptions, connect, q
from gpunode.facts import Facts, facts_subshell, parse_facts
from gpunode.inventory import Host
from gpunode.scripts import gpu_evidence_script
from gpunode.verify import ContainerTest, Expectations, Finding, analyze
from gpunode.verify.host_evidence import evidence_from, split_sections
from gpunode.verify.report import HostReport

CONTAINER_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


@dataclass
class VerifyOptions:
    """What a host is checked against: the expected GPUs/model/driver, and whether (and with what) to run the
    container test."""

    expectations: Expectations
    container_test: bool | None       # None: test when docker is installed
    container_image: str = CONTAINER_IMAGE


def mount_findings(facts: Facts, expected: list[dict]) -> list[Finding]:
    """The shared storage the inventory expects (`expected_mounts`: nfs_mount arguments), checked from the facts."""
    if not expected:
        return []
    from gpunode.steps.nfs.check import check_mounts  # only with expected_mounts: it loads every step type

    findings = []
    for result in check_mounts(facts, list(expected)):
        ok = result["status"] == "ok"
        findings.append(Finding(
            id="nfs-mount-ok" if ok else f"nfs-mount-{result['status']}", severity="ok" if ok else "critical",
            summary=result["message"],
            evidence=f"live: {result['live_source']} {result['live_options']}" if result["live_source"]
            else f"not in /proc/self/mounts; fstab line present: {result['in_fstab']}",
            remedy="" if ok else f"gpunode mount-nfs HOST --server ... --path {result['path']} (or playbooks/nfs.yml)",
        ))
    return findings


def verify_host(host: Host, options: VerifyOptions, connect_options: ConnectOptions) -> dict:
    """The JSON report of one host (check_host's HostReport as a dict; image builds read it)."""
    return check_host(host, options, connect_options).to_dict()


def check_host(host: Host, options: VerifyOptions, connect_options: ConnectOptions) -> HostReport:
    """One exec for facts + evidence, one more for the container test; returns the typed report."""
    conn = connect(host, connect_options)
    try:
        conn.open()
        script = facts_subshell() + gpu_evidence_script()
        result = conn.run("bash -s", stdin=script, label="facts + gpu evidence")
        facts_text, sections = split_sections(result.stdout)
        facts = parse_facts(facts_text)
        expectations = _with_inventory_defaults(options.expectations, host)
        evidence = evidence_from(facts, sections, expectations)
        run_container = options.container_test if options.container_test is not None else \
            facts.containers.docker_installed and bool(evidence.pci_gpus)
        if run_container:
            image = q(str(host.vars.get("verify_container_image", options.container_image)))
            test = conn.run(f"timeout 300 docker run --rm --gpus all {image} nvidia-smi -L 2>&1",
                            label="container GPU test")
            evidence.container_test = ContainerTest(test.stdout + test.stderr, test.exit_code)
        findings = analyze(evidence) + mount_findings(facts, host.vars.get("expected_mounts") or [])
        return HostReport(host.name, findings, evidence.smi, exec_count=conn.transcript.exec_count)
    finally:
        conn.close()
        conn.transcript.close()


def _with_inventory_defaults(expect: Expectations, host: Host) -> Expectations:
    """Command-line expectations win; inventory vars (expect_gpus, expect_model, min_driver) fill the gaps."""
    return Expectations(
        expect_gpus=expect.expect_gpus if expect.expect_gpus is not None else _int(host.vars.get("expect_gpus")),
        expect_model=expect.expect_model or host.vars.get("expect_model"),
        min_driver=expect.min_driver or (str(host.vars["min_driver"]) if "min_driver" in host.vars else None),
    )


def _int(value: object) -> int | None:
    return int(value) if value not in (None, "") else None  # type: ignore[arg-type]
