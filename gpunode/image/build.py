"""`build-ami` / `build-image`: a build folder, a key, the spec, Packer run live, then tags and the image record."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.app.variables import parse_vars
from gpunode.errors import GpunodeError, UsageError
from gpunode.image import packer as packer_cli
from gpunode.image.bases import (
    DEFAULT_BASE,
    QEMU_EXAMPLE_IMAGE,
    alicloud_image_family,
    alicloud_source_example,
    aws_base,
    other_base,
    tencent_image_name,
    tencent_os_name,
)
from gpunode.image.batch import BatchRequest
from gpunode.image.keys import generate_key, key_user_data, public_key_line
from gpunode.image.machine import MachineLine
from gpunode.image.names import check_network_vars, cloud_image_name
from gpunode.image.outputs import JobSpec
from gpunode.image.report import BuildReport
from gpunode.image.spec import BuildSpec
from gpunode.image.tags import honest_base, static_tags, version_tags
from gpunode.inventory import Host
from gpunode.playbook import Playbook, load_playbook
from gpunode.playbook.validate import check_arguments
from gpunode.playbook.vartypes import check_var_types

BUILDERS = ("aws", "alicloud", "tencent", "qemu")
DRIVER_BASES = ("al2023-ecs-gpu",)  # AWS bases that ship NVIDIA's driver (docs/images.md: AWS Batch)


@dataclass
class BuildRequest:
    """Everything `build-ami` / `build-image` was asked for."""

    builder: str = "aws"
    playbook: str = ""  # a built-in name or a path; empty: the base's default (default_playbook)
    variables: list[str] = field(default_factory=list)     # playbook variables, KEY=VALUE
    base: str = DEFAULT_BASE
    region: str | None = None
    instance_type: str | None = None
    driver_branch: int | None = None
    name: str | None = None
    source_image: str | None = None                         # an exact base image (AMI id, img-..., qcow2 path)
    packer_vars: list[str] = field(default_factory=list)    # template variables, KEY=VALUE
    ssh_key: str | None = None                              # an existing private key instead of a new one
    endpoint: str | None = None                             # another EC2 endpoint (a local moto_server)
    verify: str = "auto"
    expect_gpus: int | None = None
    min_free_gb: float = 2.0
    validate_only: bool = False
    launch_template: str | None = None
    batch: str | None = None
    batch_job_definition: str | None = None                 # also write a Batch job definition (needs `job`)
    job: JobSpec | None = None
    user_data: str = ""                                     # embedded in the launch template (--user-data FILE)
    batch_job_queue: str | None = None                      # also write a Batch job queue (needs `batch`)
    batch_job: str | None = None                            # also write a Batch job (needs the queue, the definition)
    subnets: list[str] = field(default_factory=list)        # the compute environment's network and roles (the user's)
    security_groups: list[str] = field(default_factory=list)
    instance_role: str | None = None
    service_role: str | None = None
    build_root: str = field(default_factory=lambda: os.environ.get("GPUNODE_BUILDS", ".gpunode/builds"))


@dataclass
class BuildResult:
    build_id: str
    build_dir: Path
    image_id: str = ""
    region: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    report: BuildReport | None = None
    outputs: list[Path] = field(default_factory=list)


@dataclass
class _Build:
    """One build in progress: its folder, key, playbook and Packer."""

    request: BuildRequest
    packer: packer_cli.Packer
    book: Playbook
    build_id: str
    directory: Path
    key_file: str = ""
    public_key: str = ""
    made_parents: list[Path] = field(default_factory=list)  # folders above `directory` this build created

    def discard(self) -> None:
        """Remove the build folder, and the parents this build made (.gpunode/builds) when they are left empty."""
        shutil.rmtree(self.directory, ignore_errors=True)
        for parent in self.made_parents:  # deepest first
            try:
                parent.rmdir()
            except OSError:  # another build's folder (or anything else) is in it: kept
                break

    @property
    def name(self) -> str:
        """The image name; on alicloud/tencent one the cloud accepts (it is also the Name tag and the record's)."""
        name = self.request.name or f"gpunode-{self.book.name}-{self.request.base}-{self.build_id}"
        if self.request.builder in ("alicloud", "tencent"):
            return cloud_image_name(self.request.builder, name, self.build_id, bool(self.request.name))
        return name

    @property
    def keypair_name(self) -> str:
        return f"gpunode-build-{self.build_id}"

    def static_tags(self) -> dict[str, str]:
        return static_tags(self.name, self.build_id, self.request.base, self.book.path, self.book.sha256,
                           self.request.driver_branch)


def build_image(request: BuildRequest, out: Callable[[str], None] = print) -> BuildResult:
    """Run one image build; raises GpunodeError naming the failed step (on the instance or in Packer)."""
    if request.builder not in BUILDERS:
        raise UsageError(f"unknown builder {request.builder!r}", fix=f"use one of: {', '.join(BUILDERS)}")
    if request.verify not in ("auto", "always", "never"):
        raise UsageError(f"--verify must be auto, always or never, not {request.verify!r}")
    _check_base(request)
    if request.builder == "aws" and not request.validate_only:
        from gpunode.image.aws import require_boto3

        require_boto3()
    check_network_vars(request.builder, {"region": request.region, **parse_vars(request.packer_vars)})
    if request.builder == "aws":
        batch_request(request).check(request.user_data)
    if request.builder == "tencent" and not request.validate_only:
        from gpunode.image import tencent

        tencent.require_sdk()  # gpunode tags the image after the build (Packer 1.6 cannot; no version tags on 1.7+)
    build = _prepare(request)
    try:  # a build that never starts keeps no folder (and so no private key); --validate-only never starts one
        variables = _template_vars(build)
        staged = packer_cli.stage(request.builder, build.packer, build.directory / "packer")
        var_file = packer_cli.write_var_file(variables, build.directory / "vars.pkrvars.hcl")
        packer_cli.ensure_plugins(request.builder, build.packer, staged, out)
        packer_cli.validate(build.packer, staged, var_file)
    except BaseException:
        build.discard()
        raise
    if variables.get("accelerator") == "tcg":
        out("the build VM runs under software emulation (accelerator tcg: no usable /dev/kvm, or asked for), many "
            "times slower than kvm")
    out(f"packer {build.packer.version_text}: {packer_cli.TEMPLATES[request.builder]} is valid "
        f"(build {build.build_id})")
    result = BuildResult(build.build_id, build.directory, region=str(variables.get("region", "")))
    if request.validate_only:
        build.discard()
        return result
    out(f"build folder: {build.directory}")
    if request.builder == "aws":
        return _build_aws(build, staged, variables, var_file, result, out)
    run = packer_cli.build(build.packer, staged, var_file, _printer(out))
    result.report = _check(build, run)
    result.image_id = _artifact(build, run)
    result.tags = honest_base({**build.static_tags(), **version_tags(result.report)})
    where = "a qcow2 file has no tags" if request.builder == "qemu" else \
        f"{request.builder} images carry the static tags Packer set"
    if request.builder == "tencent":
        where = _tag_tencent(build, result)
    _record(build, result)
    out(f"image {result.image_id}: tags recorded in {build.directory / 'image.json'} ({where})")
    return result


def _tag_tencent(build: _Build, result: BuildResult, tag_client=None) -> str:
    """Every tag, on every Packer version: 1.6's builder tags nothing, and 1.7+'s image_tags are only the static ones
    (the versions are known after provisioning)."""
    from gpunode.image import tencent

    region, image_id = tencent.artifact_image(result.image_id, result.region)
    result.tags = tencent.cloud_tags(result.tags)
    calls = tencent.tag_image(region, image_id, result.tags, tag_client)
    result.image_id, result.region = image_id, region
    return f"tagged by gpunode ({calls} ModifyResourceTags call{'s' if calls != 1 else ''})"


def _check_base(request: BuildRequest) -> None:
    """Bad base or missing base image: refused before anything is created."""
    if request.builder == "aws":
        aws_base(request.base)
        return
    other_base(request.builder, request.base)
    if not request.source_image and request.builder == "tencent" and tencent_image_name(request.base):
        return  # found by name (source_image_name)
    if not request.source_image and request.builder == "alicloud" and alicloud_image_family(request.base):
        # Image families select custom images (the plugin's image_family, run_config.go 697283d:36-37): a public base
        # is given by its id, which DescribeImages finds by the public family (ImageOwnerAlias system, ImageFamily)
        raise UsageError(f"alicloud builds need the id of the {request.base} base image: the plugin's image_family "
                         "picks the newest custom image of a family, not a public one",
                         fix=f"add --source-image (e.g. {alicloud_source_example(request.base)}); find it with "
                         f"`aliyun ecs DescribeImages --RegionId <region> --ImageOwnerAlias system --ImageFamily "
                         f"{alicloud_image_family(request.base)}`")
    if not request.source_image:
        example = {"alicloud": alicloud_source_example(request.base), "tencent": "img-xxxxxxxx",
                   "qemu": f"a qcow2 path or URL, e.g. {QEMU_EXAMPLE_IMAGE}"}[request.builder]
        raise UsageError(f"{request.builder} builds need the base image", fix=f"add --source-image ({example})")
    if request.builder == "qemu" and "://" not in request.source_image:
        local = Path(request.source_image).expanduser().resolve()  # Packer runs in the build folder
        if not local.is_file():
            raise UsageError(f"the base image {request.source_image} does not exist",
                             fix="give the path of a qcow2 file (or an http(s) URL) with --source-image")
        request.source_image = str(local)


def default_playbook(request: BuildRequest) -> str:
    """The playbook a build runs without --playbook: `base` on a base that ships its NVIDIA driver, else gpu-node."""
    if request.builder == "aws" and request.base in DRIVER_BASES:
        return "base"
    return "gpu-node"


def check_playbook_for_base(request: BuildRequest, book: Playbook) -> None:
    """A base that ships NVIDIA's driver (the ECS GPU AMI) must not get a second one: another driver breaks it."""
    if request.builder != "aws" or request.base not in DRIVER_BASES:
        return
    steps = [*book.steps, *book.handlers.values()]
    driver = next((step for step in steps if step.kind == "nvidia_driver"), None)
    if driver:
        raise UsageError(f"--base {request.base} already carries AWS's NVIDIA driver and container toolkit; playbook "
                         f"{book.name} installs another driver ({driver.source}:{driver.line}), which breaks it",
                         source="--playbook",
                         fix="leave --playbook out (the default on this base is `base`), or give a playbook without "
                             "an nvidia_driver step (e.g. --playbook base)")


def _prepare(request: BuildRequest) -> _Build:
    request.playbook = request.playbook or default_playbook(request)
    book = load_playbook(request.playbook)
    check_playbook_for_base(request, book)
    packer = packer_cli.find_packer()
    variables = parse_vars(request.variables)
    check_var_types(book, variables)
    # every templated argument the controller can render is checked now, as provision does, not on the build instance
    branch = {"driver_branch": int(request.driver_branch)} if request.driver_branch else {}
    check_arguments(book, [Host(name="build-instance", address="127.0.0.1")], {**variables, **branch})
    parse_vars(request.packer_vars)  # refused now, not after a build folder exists
    if request.ssh_key and not Path(request.ssh_key).expanduser().is_file():
        raise UsageError(f"no such key file: {request.ssh_key}", source="--ssh-key",
                         fix="give the path of an existing private key, or leave --ssh-key out: gpunode makes one")
    build_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
    directory = Path(request.build_root).resolve() / build_id
    made = [parent for parent in directory.parents if not parent.exists()]
    directory.mkdir(parents=True)
    build = _Build(request, packer, book, build_id, directory, made_parents=made)
    if request.ssh_key:
        build.key_file = str(Path(request.ssh_key).resolve())
        build.public_key = public_key_line(build.key_file)
    else:  # every builder: gpunode's own key (imported on AWS, user data on alicloud/tencent, NoCloud on qemu)
        build.key_file = str(directory / "id_ed25519")
        build.public_key = generate_key(Path(build.key_file), f"gpunode-build-{build_id}")
    if request.driver_branch:
        variables["driver_branch"] = int(request.driver_branch)
    BuildSpec(playbook=str(Path(book.path).resolve()), build_dir=str(directory), variables=variables,
              key_file=build.key_file, verify=request.verify, expect_gpus=request.expect_gpus,  # type: ignore[arg-type]
              min_free_gb=request.min_free_gb, power_off=request.builder == "qemu",
              ecs_agent=needs_ecs_agent(request)).write()
    return build


def needs_ecs_agent(request: BuildRequest) -> bool:
    """An image for AWS Batch (an ECS base, or a Batch output asked for) must pass the ECS agent checks."""
    if request.builder != "aws":
        return False
    return aws_base(request.base).ecs_agent or batch_request(request).wanted


def batch_request(request: Any) -> BatchRequest:
    """The Batch files a build or bake request asks for, and the user's network and roles they name."""
    return BatchRequest(launch_template=request.launch_template, compute_environment=request.batch,
                        job_queue=request.batch_job_queue, job_definition=request.batch_job_definition,
                        job=request.batch_job, subnets=list(request.subnets),
                        security_groups=list(request.security_groups), instance_role=request.instance_role,
                        service_role=request.service_role, job_spec=request.job)


def _template_vars(build: _Build) -> dict[str, Any]:
    """The template's variables: the toolkit's choices, then --packer-var overrides."""
    request = build.request
    variables: dict[str, Any] = {"build_dir": str(build.directory), "gpunode_python": sys.executable,
                                 "save_packer_key": not build.key_file}
    if request.region:
        variables["region"] = request.region
    if request.instance_type:
        variables["instance_type"] = request.instance_type
    if request.builder == "aws":
        base = aws_base(request.base)
        variables.update(
            ami_name=build.name, tags=build.static_tags(), source_ami=request.source_image or "",
            source_ami_name=base.name_filter, source_ami_owners=list(base.owners), ssh_username=base.ssh_username,
            root_device_name=base.root_device, ssh_keypair_name=build.keypair_name,
            ssh_private_key_file=build.key_file, aws_endpoint=request.endpoint or "",
        )
        variables.setdefault("region", "us-east-1")
    elif request.builder in ("alicloud", "tencent"):
        user = other_base(request.builder, request.base)
        variables.update(image_name=build.name, source_image=request.source_image or "", tags=build.static_tags(),
                         ssh_username=user, ssh_private_key_file=build.key_file,
                         user_data=key_user_data(user, build.public_key))
        if request.builder == "tencent" and not request.source_image:  # validated as a name; a build gets the id
            variables["source_image_name"] = tencent_image_name(request.base)
    else:
        variables.update(source_image=request.source_image, image_name=build.name, output_dir=str(
            build.directory / "output"), ssh_username=other_base("qemu", request.base),
            ssh_private_key_file=build.key_file, seed_dir=str(_nocloud_seed(build)), accelerator=qemu_accelerator())
    variables.update(parse_vars(request.packer_vars))
    if request.builder == "tencent" and not request.source_image and not request.validate_only:
        variables.update(_tencent_base(request.base, str(variables.get("region") or TENCENT_DEFAULT_REGION)))
    return variables


TENCENT_DEFAULT_REGION = "ap-guangzhou"  # the tencent template's default region (packer/tencent.pkr.hcl)


def _tencent_base(base: str, region: str, call: Any = None) -> dict[str, str]:
    """The TencentOS base's image id, found by gpunode (every DescribeImages page, matched on OsName) instead of the
    builder's one-page name lookup."""
    from gpunode.image import tencent_images

    os_name = tencent_os_name(base)
    image_id, _ = tencent_images.find_public_image(os_name, call or tencent_images.caller(region))
    return {"source_image": image_id, "source_image_name": ""}


def qemu_accelerator() -> str:
    """kvm when /dev/kvm is usable here, else tcg (software emulation)."""
    return "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"


def _nocloud_seed(build: _Build) -> Path:
    """A cloud-init NoCloud seed that lets the build key in (qemu builds of cloud images)."""
    seed = build.directory / "seed"
    seed.mkdir(exist_ok=True)
    (seed / "user-data").write_text("#cloud-config\nssh_pwauth: false\nssh_authorized_keys:\n"
                                    f"  - {build.public_key}\n")
    (seed / "meta-data").write_text(f"instance-id: {build.keypair_name}\nlocal-hostname: gpunode-build\n")
    return seed


def _printer(out: Callable[[str], None]) -> Callable[[MachineLine], None]:
    """Packer's ui lines, as they come. Packer lists each artifact once per artifact, and the manifest
    post-processor hands the builder's artifact on as a second one: its "--> build: AMIs were created" block is
    printed once."""
    listed: set[str] = set()

    def on_line(line: MachineLine) -> None:
        text = line.ui_text
        if text is None:
            return
        if text.startswith("--> "):
            if text in listed:
                return
            listed.add(text)
        out(text.rstrip("\n"))
    return on_line


def _check(build: _Build, run: packer_cli.PackerRun) -> BuildReport:
    """The provisioning report when the build succeeded; the most precise error when it did not."""
    report = BuildReport.read(build.directory / "report.json")
    if run.interrupted:
        raise GpunodeError("the build was interrupted (Ctrl-C); Packer cleaned up the build instance",
                           fix="run the build again", step="packer")
    if report is not None and not report.ok:
        raise report.failure()
    if not run.ok:
        errors = [e.strip() for e in run.errors if e.strip()] or [f"packer exited {run.exit_code}"]
        raise GpunodeError(f"packer build failed: {errors[-1]}", step="packer",
                           fix="read Packer's output above; Packer removed what it had created")
    if report is None:
        raise GpunodeError("packer finished but gpunode never provisioned the instance (no report.json)",
                           step="packer", fix="the template must call `gpunode image-provision` (shell-local)")
    return report


def _artifact(build: _Build, run: packer_cli.PackerRun) -> str:
    if build.request.builder == "qemu":  # the artifact is the disk file (its "id" is just "VM")
        disks = [f for f in run.artifacts.files() if f.endswith(".qcow2")]
        if disks:
            return str(Path(build.directory / "packer", disks[0]).resolve())
    ids = run.artifacts.ids() or packer_cli.manifest_artifact_ids(build.directory / "manifest.json")
    if not ids:
        raise GpunodeError("packer reported no artifact", step="packer", fix="read Packer's output above")
    return ids[0]


def _source_ami(build: _Build, ec2: Any, variables: dict[str, Any], var_file: Path,
                out: Callable[[str], None]) -> None:
    """AWS's recommended AMI (public SSM parameter) for the base when there is one, else Packer's filter."""
    from gpunode.image import aws

    base = aws_base(build.request.base)
    if variables.get("source_ami") or not base.ssm_parameter:
        return
    found = aws.recommended_ami(aws.ssm_client(str(variables["region"]), build.request.endpoint), ec2,
                                base.ssm_parameter)
    if isinstance(found, str):
        out(f"base {build.request.base}: SSM parameter {base.ssm_parameter} not usable ({found}); Packer takes the "
            f"newest AMI named {base.name_filter}")
        return
    variables["source_ami"] = found[0]
    packer_cli.write_var_file(variables, var_file)
    out(f"base {build.request.base}: {found[0]} ({found[1]}), AWS's recommended AMI ({base.ssm_parameter})")


def _build_aws(build: _Build, staged: Path, variables: dict[str, Any], var_file: Path, result: BuildResult,
               out: Callable[[str], None]) -> BuildResult:
    from gpunode.image import aws
    from gpunode.image.batch import write_batch_files
    from gpunode.image.outputs import launch_template

    request = build.request
    ec2 = aws.ec2_client(result.region, request.endpoint)
    _source_ami(build, ec2, variables, var_file, out)
    aws.import_key_pair(ec2, build.keypair_name, build.public_key, build.static_tags())
    try:
        run = packer_cli.build(build.packer, staged, var_file, _printer(out))
    finally:
        aws.delete_key_pair(ec2, build.keypair_name)
        left = aws.build_leftovers(ec2, build.build_id)
        if left:
            out(f"WARNING: instances of build {build.build_id} are still alive: {', '.join(left)}; terminate them")
    result.report = _check(build, run)
    artifact = _artifact(build, run)
    result.region, _, result.image_id = artifact.rpartition(":")
    result.tags = honest_base({**build.static_tags(), **version_tags(result.report)})
    if result.tags.get("gpunode:stand-in"):
        out(f"note: the instance provisioned runs {result.tags['gpunode:os']}, not the {request.base} base it was "
            "launched from (a stand-in, e.g. --packer-var ssh_host=): gpunode:base says so")
    try:
        aws.tag_image(ec2, result.image_id, result.tags)
    except GpunodeError:
        aws.remove_image(ec2, result.image_id)  # an untagged image would hide what it carries: none at all
        raise
    base = aws_base(request.base)
    instance_type = request.instance_type or "g5.xlarge"
    template = launch_template(result.image_id, build.name, instance_type, result.tags, root_device=base.root_device,
                               user_data=request.user_data)
    result.outputs.extend(write_batch_files(batch_request(request), result.image_id, build.name, instance_type,
                                            base.batch_image_type, template))
    _record(build, result)
    out(f"AMI {result.image_id} ({result.region}) tagged: driver {result.tags['gpunode:driver']}, "
        f"CUDA {result.tags['gpunode:cuda']}, container toolkit {result.tags['gpunode:container-toolkit']}")
    return result


def _record(build: _Build, result: BuildResult) -> None:
    record = {"build_id": build.build_id, "builder": build.request.builder, "image_id": result.image_id,
              "region": result.region, "name": build.name, "tags": result.tags,
              "outputs": [str(p) for p in result.outputs]}
    (build.directory / "image.json").write_text(json.dumps(record, indent=2) + "\n")
