"""The image tasks: plan, build-ami, build-image, bake, image-provision (run by Packer), user-data."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke.exceptions import Exit

from gpunode.clouds import bases_help, builders_help, names
from gpunode.commands.common import cli_errors
from gpunode.distros import DEFAULT_BASE
from gpunode.errors import UsageError
from gpunode.task_groups.base import CONN_HELP, EXTRA_VARS_HELP, KEYS_HELP, PLAYBOOK_HELP, _amount, _whole, gtask

PINNED_STATES = Path(__file__).parents[1] / "image" / "states"  # one YAML per base (gpunode/image/image_state.py)


@gtask(iterable=["var"], help={
    "image": "the base image whose pinned state is planned from (gpunode/image/states/: "
             + ", ".join(sorted(p.stem for p in PINNED_STATES.glob("*.yaml"))) + ")",
    "playbook": f"{PLAYBOOK_HELP}; default base", "json": "print JSON",
    "var": "extra variable KEY=VALUE; repeatable",
})
def plan(c, image=None, playbook="base", json=False, var=None):
    """What a bake would do to a base image: the playbook planned on the image's pinned state, offline."""
    from gpunode.commands.plan_cmd import plan_text

    with cli_errors():
        print(plan_text(image, playbook, json, var or []), end="")


IMAGE_HELP = {
    "playbook": f"playbook run on the build instance: {PLAYBOOK_HELP}; default gpu-node (base on --base "
                "al2023-ecs-gpu, whose NVIDIA driver is AWS's)",
    "var": "playbook variable KEY=VALUE; repeatable", "extra_vars": EXTRA_VARS_HELP,
    "driver_branch": "NVIDIA driver branch, e.g. 580",
    "base": bases_help([name for name in names() if name != "aws"]),
    "region": "cloud region where the builder has one (AWS default: AWS_REGION or us-east-1; gcp takes a zone: "
              "--packer-var zone=...)", "instance_type": "build instance type (machine type)",
    "name": "image name (default gpunode-<playbook>-<base>-<build id>)",
    "validate_only": "check the playbook, the variables and the template (packer validate, no credentials); build "
                     "nothing, keep nothing. Offline with Packer 1.6 (builders built in); Packer 1.7+ runs `packer "
                     "init` first, which downloads the builder's plugin unless it is installed",
    "packer_var": "template variable KEY=VALUE, e.g. project_id=my-project (gcp); repeatable; each builder's are "
                  "in docs/clouds.md, and one its template lacks is refused",
    "ssh_key": "an existing private key for the build instead of a new one (must be accepted by the base image)",
    "verify": "verify-gpu on the build instance: auto (when it has GPUs, default), always, never",
    "expect_gpus": "GPUs the build instance must show (verify-gpu)",
    "min_free_gb": "free space the image must keep on / (default 2)",
    "launch_template": "also write an EC2 launch-template JSON for the new AMI here",
    "batch": "also write an AWS Batch compute-environment JSON for the new AMI here",
}
JOB_HELP = {
    "batch_job_definition": "also write an AWS Batch job definition JSON (a container job asking for GPUs) here",
    "job_image": "the job definition's container image (needed with --batch-job-definition)",
    "job_command": "the job's command, split like a shell would (default nvidia-smi)",
    "job_gpus": "GPUs the job asks for (default 1)", "job_vcpus": "vCPUs (default 4)",
    "job_memory": "memory in MiB (default 16384: more than a 16 GiB instance registers, so on the default "
                  "g5.xlarge give less, e.g. 14336, or a larger --instance-type; Batch's memory-management page)",
    "user_data": "embed this user data (from `gpunode user-data --bundle-url`; for --batch: `--format mime`) in the "
                 "--launch-template output",
}
BATCH_HELP = {
    "batch_job_queue": "also write an AWS Batch job queue JSON (sending jobs to the --batch compute environment) here",
    "batch_job": "also write an AWS Batch submit-job JSON (the job definition on the queue) here",
    "subnet": "a VPC subnet id of the compute environment (needed with --batch); repeatable",
    "security_group": "a security group id of the compute environment (needed with --batch); repeatable",
    "instance_role": "the ECS instance profile (name or ARN) of the compute environment (needed with --batch)",
    "service_role": "the Batch service role ARN (default: Batch's service-linked role)",
}


def _outputs(launch_template, batch, batch_job_queue, batch_job_definition, batch_job, job, subnet, security_group,
             instance_role, service_role, user_data):
    """The launch template and Batch files a build-ami or bake asks for (checked before anything starts)."""
    from gpunode.image.batch import BatchRequest
    from gpunode.image.outputs import JobSpec, read_user_data

    return BatchRequest(launch_template=launch_template, compute_environment=batch, job_queue=batch_job_queue,
                        job_definition=batch_job_definition, job=batch_job, subnets=list(subnet or []),
                        security_groups=list(security_group or []), instance_role=instance_role,
                        service_role=service_role, user_data=read_user_data(user_data),
                        job_spec=JobSpec.parse(*job) if batch_job_definition else None)


def _all_vars(var: list[str] | None, extra_vars: list[str] | None) -> list[str]:
    """--var pairs, then -e's (K=V, @file, JSON/YAML) as pairs that read back to the same values."""
    if not extra_vars:
        return list(var or [])
    from gpunode.app.variables import as_var_pairs, parse_extra_vars

    return [*(var or []), *as_var_pairs(parse_extra_vars(extra_vars))]


def _build_request(builder, playbook, var, base, region, instance_type, driver_branch, name, source_image,
                   packer_var, ssh_key, verify, expect_gpus, min_free_gb, validate_only, aws=None):
    from gpunode.image.build import AwsOptions, BuildRequest

    return BuildRequest(builder=builder, playbook=playbook, variables=var or [], base=base, region=region,
                        instance_type=instance_type, driver_branch=_whole("--driver-branch", driver_branch),
                        name=name, source_image=source_image, packer_vars=packer_var or [], ssh_key=ssh_key,
                        verify=verify, expect_gpus=_whole("--expect-gpus", expect_gpus),
                        min_free_gb=_amount("--min-free-gb", min_free_gb, 2.0), validate_only=validate_only,
                        aws=aws or AwsOptions())


@gtask(iterable=["var", "packer_var", "extra_vars", "subnet", "security_group"], help={
    **IMAGE_HELP, **JOB_HELP, **BATCH_HELP, "source_ami": "an exact base AMI id (default: the newest AMI of --base)",
    "base": bases_help(["aws"]),
    "endpoint": "another EC2 endpoint URL (e.g. a local moto_server)",
})
def build_ami(c, region=None, instance_type="g5.xlarge", base=DEFAULT_BASE, driver_branch=None,
              playbook="", var=None, validate_only=False, name=None, source_ami=None,
              packer_var=None, ssh_key=None, endpoint=None, verify="auto", expect_gpus=None, min_free_gb=None,
              launch_template=None, batch=None, batch_job_definition=None, job_image=None, job_command=None,
              job_gpus=None, job_vcpus=None, job_memory=None, user_data=None, extra_vars=None, batch_job_queue=None,
              batch_job=None, subnet=None, security_group=None, instance_role=None, service_role=None):
    """Bake an AWS AMI with Packer: gpunode provisions the build instance, cleans and validates it, then tags it."""
    from gpunode.commands.image_cmd import build
    from gpunode.image.build import AwsOptions

    with cli_errors():
        outputs = _outputs(launch_template, batch, batch_job_queue, batch_job_definition, batch_job,
                           (job_image, job_command, job_gpus, job_vcpus, job_memory), subnet, security_group,
                           instance_role, service_role, user_data)
        code = build(_build_request("aws", playbook, _all_vars(var, extra_vars), base, region, instance_type,
                                    driver_branch, name, source_ami, packer_var, ssh_key, verify, expect_gpus,
                                    min_free_gb, validate_only, AwsOptions(endpoint, outputs)))
    if code:
        raise Exit(code=code)


@gtask(iterable=["var", "packer_var", "extra_vars"], help={
    **{k: v for k, v in IMAGE_HELP.items() if k not in ("launch_template", "batch")},
    "builder": builders_help("qemu"),
    "source_image": "the base image: a qcow2 path/URL (qemu) or the cloud's image id (the bases a cloud finds by "
                    "name need none: docs/clouds.md)",
})
def build_image(c, builder="qemu", region=None, instance_type=None, base=DEFAULT_BASE, driver_branch=None,
                playbook="", var=None, validate_only=False, name=None, source_image=None,
                packer_var=None, ssh_key=None, verify="auto", expect_gpus=None, min_free_gb=None, extra_vars=None):
    """Bake a node image with Packer on a builder other than AWS (--builder; docs/clouds.md)."""
    from gpunode.commands.image_cmd import build

    with cli_errors():
        code = build(_build_request(builder, playbook, _all_vars(var, extra_vars), base, region, instance_type,
                                    driver_branch, name, source_image, packer_var, ssh_key, verify,
                                    expect_gpus, min_free_gb, validate_only))
    if code:
        raise Exit(code=code)


@gtask(positional=["target"], iterable=["inventory", "subnet", "security_group"], help={
    "target": "the host: a pattern of the inventory given with -i, else user@host[:port]",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP, "name": "image name (required)",
    "region": "AWS region (default AWS_REGION or us-east-1)", "endpoint": "another EC2 endpoint URL (moto_server)",
    "playbook": "the playbook the host was provisioned with (its sha256 is tagged)",
    "keep_key": "keep the connecting key in authorized_keys (it is removed by default)",
    "verify": IMAGE_HELP["verify"], "min_free_gb": IMAGE_HELP["min_free_gb"],
    "launch_template": IMAGE_HELP["launch_template"], "batch": IMAGE_HELP["batch"], **JOB_HELP, **BATCH_HELP,
})
def bake(c, target, name=None, inventory=None, region=None, endpoint=None, playbook=None, keep_key=False,
         verify="auto", min_free_gb=None, accept_new_host_keys=False, launch_template=None, batch=None,
         batch_job_queue=None, batch_job_definition=None, batch_job=None, job_image=None, job_command=None,
         job_gpus=None, job_vcpus=None, job_memory=None, user_data=None, subnet=None, security_group=None,
         instance_role=None, service_role=None):
    """Image an already provisioned EC2 instance: cleanup + validation, stop, create the AMI, wait, tag."""
    import os

    from gpunode.commands.image_cmd import bake_host
    from gpunode.errors import UsageError
    from gpunode.image.bake import BakeRequest

    with cli_errors():
        if not name:
            raise UsageError("bake needs --name", fix="e.g. --name gpu-node-2024-06")
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        outputs = _outputs(launch_template, batch, batch_job_queue, batch_job_definition, batch_job,
                           (job_image, job_command, job_gpus, job_vcpus, job_memory), subnet, security_group,
                           instance_role, service_role, user_data)
        code = bake_host(BakeRequest(target, name, inventory or [], region, endpoint, playbook, keep_key, verify,
                                     _amount("--min-free-gb", min_free_gb, 2.0), accept_new_host_keys, outputs))
    if code:
        raise Exit(code=code)


@gtask(help={"spec": "the build spec (<build_dir>/build.json; required)",
             "host": "build instance address (build.Host; required)",
             "port": "SSH port (build.Port)", "user": "SSH user (build.User)"})
def image_provision(c, spec=None, host=None, port=22, user="root"):
    """Run by Packer's shell-local provisioner: playbook, verify-gpu, image cleanup and validation; JSON report."""
    from gpunode.commands.image_cmd import image_provision as run

    with cli_errors():
        if not spec or not host:
            raise UsageError("image-provision needs --spec and --host", fix="it is run by Packer for `gpunode "
                             "build-ami`/`build-image`: --spec BUILD_DIR/build.json --host ADDRESS")
        code = run(spec, host, _whole("--port", port) or 22, user)
    if code:
        raise Exit(code=code)


@gtask(iterable=["var", "extra_vars"], help={
    "playbook": f"the playbook the new node runs on itself at first boot: {PLAYBOOK_HELP}; default base",
    "var": "playbook variable KEY=VALUE; repeatable", "extra_vars": EXTRA_VARS_HELP,
    "format": "shell (a bash script, default), cloud-init, or mime (the script in a MIME multi-part archive: what an "
              "AWS Batch launch template needs)",
    "output": "write the user data here (default: print it)",
    "module_cache": "the module cache: a folder on the node (a mounted share: the node installs its DKMS module from "
                    "it when its group is there, else builds it and adds it) or an https URL (a bucket: read-only, the "
                    "node builds when its group is missing) (sets module_cache)",
    "bundle_url": "fetch the gpunode bundle from this http(s) URL at boot instead of embedding it (needed for EC2, "
                  "ACK, TKE: their user data is limited to 16-32 KB)",
    "bundle_out": "with --bundle-url: write the bundle here, to upload to that URL",
})
def user_data(c, playbook="base", var=None, format="shell", output=None, bundle_url=None,  # noqa: A002
              bundle_out=None, extra_vars=None, module_cache=None):
    """User data that provisions a new node at first boot: the playbook on the node itself, verify-gpu, a marker."""
    import json
    from pathlib import Path

    from gpunode.image.userdata import CLOUD_LIMIT
    from gpunode.image.userdata import user_data as make
    from gpunode.modcache.url_source import url_problem

    with cli_errors():
        variables = _all_vars(var, extra_vars)
        if module_cache is not None:
            where = str(module_cache).strip()
            fix = ("give the bucket's https URL, or mount the share at first boot (e.g. with the nfs playbook or "
                   "fstab) and give its absolute path: --module-cache /mnt/share/modules")
            if "://" in where and (problem := url_problem(where)):
                raise UsageError(problem, source="--module-cache", fix=fix)
            if "://" not in where and not where.startswith("/"):
                raise UsageError(f"{where!r} is neither an https URL nor an absolute path on the node (the first "
                                 "boot's working directory is nobody's choice)", source="--module-cache", fix=fix)
            if any(v.partition("=")[0].strip() == "module_cache" for v in variables):
                raise UsageError("module_cache is given twice: by --module-cache and by --var/-e",
                                 source="--module-cache", fix="give it once")
            variables = [*variables, f"module_cache={json.dumps(where)}"]
        text, bundle = make(playbook, variables, format, bundle_url, bundle_out)
        if output:
            Path(output).write_text(text)
            print(f"user data written to {output} ({len(text)} bytes, bundle {len(bundle)} bytes)", file=sys.stderr)
        else:
            sys.stdout.write(text)
        if len(text) > CLOUD_LIMIT:
            print(f"note: {len(text)} bytes of user data: EC2 and Tencent CVM take at most 16 KB, Alibaba ECS 32 KB; "
                  "for them use --bundle-url URL --bundle-out FILE (embedded fits NoCloud seeds and images)",
                  file=sys.stderr)
