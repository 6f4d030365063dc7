"""`bake HOST --name N`: an image from an instance that is provisioned already.

Inspect it (and verify-gpu when it has GPUs), run playbooks/image-finalize.yml (cleanup + validation), stop it
through the EC2 API, create the AMI, wait for it and tag it. The instance is left stopped and cleaned: its SSH host
keys and the key gpunode used are gone, so it is meant to be discarded (or its keys restored) afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.app.hosts import load_hosts
from gpunode.connection import ConnectOptions, log_file_name
from gpunode.errors import UsageError
from gpunode.image import aws
from gpunode.image.bases import batch_image_type
from gpunode.image.batch import BatchRequest, write_batch_files
from gpunode.image.build import BuildResult, batch_request
from gpunode.image.inspect import inspect_host
from gpunode.image.keys import public_key_line
from gpunode.image.outputs import launch_template
from gpunode.image.provision import FINALIZE, finalize_vars, run_phase, verify_phase
from gpunode.image.report import BuildReport
from gpunode.image.tags import static_tags, version_tags
from gpunode.playbook import load_playbook


@dataclass
class BakeRequest:
    target: str
    name: str
    inventory: list[str] = field(default_factory=list)
    region: str = "us-east-1"
    endpoint: str | None = None
    playbook: str | None = None          # the playbook the instance was provisioned with (its hash is tagged)
    keep_key: bool = False               # keep the connecting key in authorized_keys
    verify: str = "auto"
    min_free_gb: float = 2.0
    accept_new_host_keys: bool = False
    outputs: BatchRequest = field(default_factory=BatchRequest)  # the launch template and Batch files
    build_root: str = field(default_factory=lambda: os.environ.get("GPUNODE_BUILDS", ".gpunode/builds"))


def bake(request: BakeRequest, out: Callable[[str], None] = print) -> BuildResult:
    """Returns the AMI id and its tags; raises GpunodeError naming the failed step."""
    aws.require_boto3()
    batch = batch_request(request)
    batch.check()
    hosts, limit = (None, request.target) if request.inventory else (request.target, None)
    _, selected = load_hosts(request.inventory, hosts, limit)
    if len(selected) != 1:
        raise UsageError(f"bake takes one host, {len(selected)} selected", fix="name exactly one host")
    host = selected[0]
    build_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
    directory = Path(request.build_root).resolve() / build_id
    directory.mkdir(parents=True)
    options = ConnectOptions(accept_new_host_keys=request.accept_new_host_keys, log_dir=directory / "logs")
    ec2 = aws.ec2_client(request.region, request.endpoint)
    instance = aws.find_instance(ec2, host.address, host.vars.get("instance_id"))
    instance_id = instance["InstanceId"]
    out(f"bake: {host.name} is {instance_id} ({instance.get('InstanceType')}, from {instance.get('ImageId')})")

    report = BuildReport(host=host.name, playbook=request.playbook or "")
    try:
        _prepare_instance(request, host, options, report)
    finally:
        report.write(directory / "report.json")
    if not report.ok:
        raise report.failure()
    book_sha = load_playbook(request.playbook).sha256 if request.playbook else ""
    tags = {**static_tags(request.name, build_id, instance.get("ImageId", ""), request.playbook or "", book_sha,
                          None), **version_tags(report), "gpunode:baked-from": instance_id}
    out(f"bake: stopping {instance_id}")
    aws.stop_instance(ec2, instance_id)
    out(f"bake: creating the image {request.name}")
    image_id = aws.create_image(ec2, instance_id, request.name, f"GPU node image baked by gpunode from "
                                f"{instance_id}", tags)
    result = BuildResult(build_id, directory, image_id, request.region, tags, report)
    instance_type = instance.get("InstanceType", "g5.xlarge")
    template = launch_template(image_id, request.name, instance_type, tags, user_data=request.outputs.user_data,
                               root_device=instance.get("RootDeviceName", "/dev/sda1"))
    image_type = batch_image_type(str((report.image or {}).get("os_id", "")))
    result.outputs.extend(write_batch_files(batch, image_id, request.name, instance_type, image_type, template))
    (directory / "image.json").write_text(json.dumps({"build_id": build_id, "image_id": image_id,
                                                      "region": request.region, "tags": tags}, indent=2) + "\n")
    out(f"AMI {image_id} ({request.region}) from {instance_id}: driver {tags['gpunode:driver']}, "
        f"CUDA {tags['gpunode:cuda']}; {instance_id} is stopped and cleaned")
    return result


def _prepare_instance(request: BakeRequest, host, options: ConnectOptions, report: BuildReport) -> None:
    """inspect, verify-gpu, finalize; the report says how far it got."""
    report.log = str(options.log_dir / log_file_name(host.name)) if options.log_dir else ""
    report.phase = "inspect"
    info = inspect_host(host, options)
    report.image = info.to_dict()
    report.phase = "verify-gpu"
    if not verify_phase(request.verify, None, host, options, info.gpu_count, report):
        return
    key = None if request.keep_key or not host.key_file else public_key_line(host.key_file)
    report.phase = "finalize"
    if not run_phase(load_playbook(FINALIZE), host, finalize_vars(key, None, request.min_free_gb, False,
                                                                  ecs_agent=batch_request(request).wanted), options,
                     report, "finalize"):
        return
    report.phase, report.ok = "done", True
