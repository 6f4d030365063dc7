"""Image tags: what is known before the build (base, playbook) and what the build found (versions, verify)."""

from __future__ import annotations

from pathlib import Path

from gpunode import __version__
from gpunode.image.report import BuildReport

MAX_VALUE = 255  # EC2's limit; keys stay short


def static_tags(name: str, build_id: str, base: str, playbook: str, playbook_sha256: str,
                driver_branch: int | None) -> dict[str, str]:
    """Set by Packer on the build instance, the image and its snapshots."""
    tags = {"Name": name, "gpunode:build-id": build_id, "gpunode:base": base, "gpunode:playbook": Path(playbook).name,
            "gpunode:playbook-sha256": playbook_sha256, "gpunode:version": __version__}
    if driver_branch:
        tags["gpunode:driver-branch"] = str(driver_branch)
    return tags


def version_tags(report: BuildReport) -> dict[str, str]:
    """Added once the build succeeded: driver, CUDA, container toolkit, kernel, OS, the verify summary."""
    image = report.image
    cuda = image.get("cuda") or (f"{image['cuda_driver']} (driver)" if image.get("cuda_driver") else "none")
    tags = {
        "gpunode:driver": image.get("driver") or "none",
        "gpunode:cuda": cuda,
        "gpunode:container-toolkit": image.get("container_toolkit") or "none",
        "gpunode:docker": image.get("docker") or "none",
        "gpunode:kernel": image.get("kernel_boot") or "",
        "gpunode:os": image.get("os_id") or "",
        "gpunode:verify": report.verify.get("summary") or "not run",
    }
    return {k: v[:MAX_VALUE] for k, v in tags.items()}


def stand_in(base: str, os_id: str) -> bool:
    """True when the provisioned instance is not of the base it was launched from: its os-release (`ID-VERSION_ID`)
    is another distro, or another release of a `<ID>-<VERSION_ID>` base (a lab host standing in for the instance)."""
    from gpunode.distros import base_os_ids

    ids = base_os_ids(base)
    if not ids or not os_id:
        return False
    distro = os_id.split("-", 1)[0]
    if distro not in ids:
        return True
    return base.startswith(f"{distro}-") and base != os_id


def honest_base(tags: dict[str, str]) -> dict[str, str]:
    """`gpunode:base` says so when the image holds another system than its base (e.g. dev/demo: Amazon's source AMI
    in moto, a lab host provisioned): `<base> (source AMI; provisioned: <os>, a stand-in)`, and gpunode:stand-in."""
    base, os_id = tags.get("gpunode:base", ""), tags.get("gpunode:os", "")
    if not stand_in(base, os_id):
        return tags
    return {**tags, "gpunode:base": f"{base} (source AMI; provisioned: {os_id}, a stand-in)"[:MAX_VALUE],
            "gpunode:stand-in": "true"}


def as_aws(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]
