"""The AWS Batch files for a GPU AMI: launch template, compute environment, job queue, job definition, job.

Each is the request body of one `aws ... --cli-input-json file://...` call (and of boto3's matching call), in the
order a user submits them: `ec2 create-launch-template`, `batch create-compute-environment`, `batch
create-job-queue`, `batch register-job-definition`, `batch submit-job`. The compute environment boots the AMI
through the launch template gpunode writes beside it (by name, its default version) and names the AMI again in
`ec2Configuration` (imageIdOverride, with the image type of the base). Field names and which of them Batch needs are
botocore's Batch model (gpunode/vendor_aws.py, AWS_BATCH); tests/test_batch_submit.py submits the files as written to a
moto server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.errors import UsageError
from gpunode.image.mime import is_mime_archive
from gpunode.image.outputs import JobSpec, batch_compute_environment, batch_job_definition, batch_name, write_json
from gpunode.vendor_aws import fact

# Where each file goes: the option that names it.
FILE_OPTIONS = {"launch_template": "--launch-template", "compute_environment": "--batch",
                "job_queue": "--batch-job-queue", "job_definition": "--batch-job-definition", "job": "--batch-job"}


@dataclass
class BatchRequest:
    """The Batch files asked for (paths; None: not written) and the user's AWS resources they name."""

    launch_template: str | None = None
    compute_environment: str | None = None
    job_queue: str | None = None
    job_definition: str | None = None
    job: str | None = None
    subnets: list[str] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)
    instance_role: str | None = None
    service_role: str | None = None
    max_vcpus: int = 256
    job_spec: JobSpec | None = None
    user_data: str = ""                  # embedded in the launch template (--user-data FILE)

    @property
    def wanted(self) -> bool:
        """Any Batch file asked for (a launch template alone is not one)."""
        return any((self.compute_environment, self.job_queue, self.job_definition, self.job))

    def check(self) -> None:
        """What Batch needs, refused now (exit 2) when missing: every option named with an example."""
        user_data = self.user_data
        needs = [(self.job_queue, self.compute_environment, "--batch-job-queue", "--batch FILE (the compute "
                  "environment the queue sends jobs to)"),
                 (self.job, self.job_queue, "--batch-job", "--batch-job-queue FILE (the queue the job goes to)"),
                 (self.job, self.job_definition, "--batch-job", "--batch-job-definition FILE (what the job runs)")]
        for asked, needed, option, fix in needs:
            if asked and not needed:
                raise UsageError(f"{option} needs {fix.split(' ', 1)[0]}", source=option, fix=f"add {fix}")
        if self.job_definition and self.job_spec is None:
            raise UsageError("--batch-job-definition needs the job's container image", source="--job-image",
                             fix="add --job-image, e.g. --job-image nvidia/cuda:12.4.1-base-ubuntu22.04")
        if not self.compute_environment:
            return
        required = [(self.launch_template, "--launch-template", "--launch-template lt.json (the compute environment "
                     "boots the AMI through it)"),
                    (self.subnets, "--subnet", "--subnet subnet-0abc1234 (repeatable; `aws ec2 describe-subnets`)"),
                    (self.security_groups, "--security-group", "--security-group sg-0abc1234 (repeatable; `aws ec2 "
                     "describe-security-groups`)"),
                    (self.instance_role, "--instance-role", "--instance-role ecsInstanceRole (the instance profile "
                     "of the ECS agent: name or ARN)")]
        for value, option, fix in required:
            if not value:
                raise UsageError(f"--batch (an EC2 compute environment) needs {option}", source=option,
                                 fix=f"add {fix}")
        if user_data and not is_mime_archive(user_data):
            raise UsageError("AWS Batch takes a launch template's user data only as a MIME multi-part archive; "
                             "this user data is a plain script or #cloud-config", source="--user-data",
                             fix="make it with `gpunode user-data --format mime ...`")


def compute_environment(request: BatchRequest, image_id: str, name: str, instance_type: str, image_type: str,
                        launch_template_name: str) -> dict[str, Any]:
    """batch create-compute-environment input: managed EC2, the user's network and roles, gpunode's template."""
    body = batch_compute_environment(image_id, name, [instance_type], request.max_vcpus, request.subnets,
                                     request.security_groups, request.instance_role or "", image_type)
    body["computeResources"]["launchTemplate"] = {"launchTemplateName": launch_template_name,
                                                  "version": fact("launch_template_version")}
    if request.service_role:
        body["serviceRole"] = request.service_role
    return body


def job_queue(name: str) -> dict[str, Any]:
    """batch create-job-queue input: one queue sending its jobs to the compute environment of the same name."""
    return {"jobQueueName": batch_name(name), "state": "ENABLED", "priority": 1,
            "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": batch_name(name)}]}


def job(name: str) -> dict[str, Any]:
    """batch submit-job input: one job of the job definition, on the queue (both by the names gpunode gave them)."""
    return {"jobName": batch_name(name), "jobQueue": batch_name(name), "jobDefinition": batch_name(name)}


def write_batch_files(request: BatchRequest, image_id: str, name: str, instance_type: str, image_type: str,
                      launch_template_body: dict[str, Any] | None) -> list[Path]:
    """Writes every file asked for; returns their paths in submission order."""
    written = []
    if request.launch_template and launch_template_body is not None:
        written.append(write_json(launch_template_body, request.launch_template))
    if request.compute_environment:
        template_name = (launch_template_body or {}).get("LaunchTemplateName", name)
        written.append(write_json(compute_environment(request, image_id, name, instance_type, image_type,
                                                      template_name), request.compute_environment))
    if request.job_queue:
        written.append(write_json(job_queue(name), request.job_queue))
    if request.job_definition and request.job_spec:
        written.append(write_json(batch_job_definition(name, request.job_spec, image_id), request.job_definition))
    if request.job:
        written.append(write_json(job(name), request.job))
    return written
