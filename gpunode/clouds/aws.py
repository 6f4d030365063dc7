"""AWS AMIs (amazon-ebs): Ubuntu, Debian, Amazon Linux 2023 and its ECS-optimized bases for AWS Batch.

The bases' AMI filters, owners and SSM parameters are the distro adapters' (gpunode/distros/, `ImageBase.aws`): each
distro's publisher names its AMIs. EC2 calls are gpunode/image/aws.py's (boto3, imported when a build runs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpunode.clouds.base import Base, Cloud, Plugin
from gpunode.distros import AWS_IMAGE_BASES
from gpunode.errors import GpunodeError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from gpunode.image.build import BuildRequest, BuildResult, _Build
    from gpunode.playbook import Playbook

DRIVER_BASES = ("al2023-ecs-gpu",)  # bases that ship NVIDIA's driver (docs/images.md: AWS Batch)
DEFAULT_REGION = "us-east-1"
DEFAULT_INSTANCE_TYPE = "g5.xlarge"


class Aws(Cloud):
    name = "aws"
    template = "aws.pkr.hcl"
    plugin = Plugin("amazon", "github.com/hashicorp/amazon", ">= 1.8.0, < 1.9.0")
    credentials_help = "AWS_PROFILE or AWS_ACCESS_KEY_ID..."
    summary = "an AWS AMI (EKS, AWS Batch, plain EC2)"

    @property
    def bases(self) -> dict[str, Base]:
        """The distro adapters' AMIs (`ImageBase.aws`): their login users."""
        return {name: Base(b.aws.ssh_username) for name, b in AWS_IMAGE_BASES.items() if b.aws}

    def base(self, base: str) -> Base:
        if base not in self.bases:
            raise UsageError(f"unknown base {base!r} for AWS", fix=f"use one of: {', '.join(self.bases)}")
        return self.bases[base]

    def default_region(self) -> str | None:
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION

    def found_by(self, base: str) -> str:
        from gpunode.image.bases import aws_base

        found = aws_base(base)
        return (f"SSM parameter {found.ssm_parameter}, else " if found.ssm_parameter else "") + \
            f"the newest AMI named {found.name_filter} of {', '.join(found.owners)}"

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        from gpunode.image.build import batch_request

        self.base(request.base)
        if not request.validate_only:
            from gpunode.image.aws import require_boto3

            require_boto3()
        batch_request(request).check()

    def default_playbook(self, request: BuildRequest) -> str:
        """`base` on a base that ships its NVIDIA driver."""
        return "base" if request.base in DRIVER_BASES else "gpu-node"

    def check_playbook(self, request: BuildRequest, book: Playbook) -> None:
        """A base that ships NVIDIA's driver (the ECS GPU AMI) must not get a second one: another driver breaks it."""
        if request.base not in DRIVER_BASES:
            return
        driver = next((step for step in [*book.steps, *book.handlers.values()] if step.kind == "nvidia_driver"), None)
        if driver:
            raise UsageError(f"--base {request.base} already carries AWS's NVIDIA driver and container toolkit; "
                             f"playbook {book.name} installs another driver ({driver.source}:{driver.line}), which "
                             "breaks it", source="--playbook",
                             fix="leave --playbook out (the default on this base is `base`), or give a playbook "
                                 "without an nvidia_driver step (e.g. --playbook base)")

    def needs_ecs_agent(self, request: BuildRequest) -> bool:
        """An image for AWS Batch (an ECS base, or a Batch output asked for) must pass the ECS agent checks."""
        from gpunode.image.bases import aws_base
        from gpunode.image.build import batch_request

        return aws_base(request.base).ecs_agent or batch_request(request).wanted

    def template_vars(self, build: _Build) -> dict[str, Any]:
        from gpunode.image.bases import aws_base

        request, base = build.request, aws_base(build.request.base)
        return {"ami_name": build.name, "tags": build.static_tags(), "source_ami": request.source_image or "",
                "source_ami_name": base.name_filter, "source_ami_owners": list(base.owners),
                "ssh_username": base.ssh_username, "root_device_name": base.root_device,
                "ssh_keypair_name": build.keypair_name, "ssh_private_key_file": build.key_file,
                "aws_endpoint": request.aws.endpoint or "", "region": request.region or DEFAULT_REGION}

    def run(self, build: _Build, staged: Path, variables: dict[str, Any], var_file: Path, result: BuildResult,
            out: Callable[[str], None]) -> BuildResult:
        """The build's key pair imported and always deleted, AWS's recommended base AMI, the AMI tagged (or removed),
        the launch template and Batch files."""
        from gpunode.image import aws
        from gpunode.image.build import check_run, record, run_packer
        from gpunode.image.tags import honest_base, version_tags

        request = build.request
        ec2 = aws.ec2_client(result.region, request.aws.endpoint)
        _source_ami(build, ec2, variables, var_file, out)
        aws.import_key_pair(ec2, build.keypair_name, build.public_key, build.static_tags())
        try:
            run = run_packer(build, staged, var_file, out)
        finally:
            aws.delete_key_pair(ec2, build.keypair_name)
            left = aws.build_leftovers(ec2, build.build_id)
            if left:
                out(f"WARNING: instances of build {build.build_id} are still alive: {', '.join(left)}; terminate them")
        result.report = check_run(build, run)
        result.region, _, result.image_id = self.artifact(build, run).rpartition(":")
        result.tags = honest_base({**build.static_tags(), **version_tags(result.report)})
        if result.tags.get("gpunode:stand-in"):
            out(f"note: the instance provisioned runs {result.tags['gpunode:os']}, not the {request.base} base it was "
                "launched from (a stand-in, e.g. --packer-var ssh_host=): gpunode:base says so")
        try:
            aws.tag_image(ec2, result.image_id, result.tags)
        except GpunodeError:
            aws.remove_image(ec2, result.image_id)  # an untagged image would hide what it carries: none at all
            raise
        result.outputs.extend(_outputs(build, result))
        record(build, result)
        out(f"AMI {result.image_id} ({result.region}) tagged: driver {result.tags['gpunode:driver']}, "
            f"CUDA {result.tags['gpunode:cuda']}, container toolkit {result.tags['gpunode:container-toolkit']}")
        return result


def _outputs(build: _Build, result: BuildResult) -> list[Path]:
    """The launch template, and the Batch files asked for."""
    from gpunode.image.bases import aws_base
    from gpunode.image.batch import write_batch_files
    from gpunode.image.build import batch_request
    from gpunode.image.outputs import launch_template

    request, base = build.request, aws_base(build.request.base)
    instance_type = request.instance_type or DEFAULT_INSTANCE_TYPE
    template = launch_template(result.image_id, build.name, instance_type, result.tags, root_device=base.root_device,
                               user_data=request.aws.outputs.user_data)
    return write_batch_files(batch_request(request), result.image_id, build.name, instance_type,
                             base.batch_image_type, template)


def _source_ami(build: _Build, ec2: Any, variables: dict[str, Any], var_file: Path,
                out: Callable[[str], None]) -> None:
    """AWS's recommended AMI (public SSM parameter) for the base when there is one, else Packer's filter."""
    from gpunode.image import aws
    from gpunode.image import packer as packer_cli
    from gpunode.image.bases import aws_base

    base = aws_base(build.request.base)
    if variables.get("source_ami") or not base.ssm_parameter:
        return
    found = aws.recommended_ami(aws.ssm_client(str(variables["region"]), build.request.aws.endpoint), ec2,
                                base.ssm_parameter)
    if isinstance(found, str):
        out(f"base {build.request.base}: SSM parameter {base.ssm_parameter} not usable ({found}); Packer takes the "
            f"newest AMI named {base.name_filter}")
        return
    variables["source_ami"] = found[0]
    packer_cli.write_var_file(variables, var_file)
    out(f"base {build.request.base}: {found[0]} ({found[1]}), AWS's recommended AMI ({base.ssm_parameter})")


CLOUD = Aws()
