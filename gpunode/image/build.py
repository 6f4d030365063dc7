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
from typing import Any, Protocol

from gpunode.app.variables import parse_vars
from gpunode.errors import GpunodeError, UsageError
from gpunode.image import packer as packer_cli
from gpunode.image.bases import DEFAULT_BASE
from gpunode.image.batch import BatchRequest
from gpunode.image.keys import generate_key, public_key_line
from gpunode.image.machine import MachineLine
from gpunode.image.report import BuildReport
from gpunode.image.spec import BuildSpec
from gpunode.image.tags import honest_base, static_tags, version_tags
from gpunode.inventory import Host
from gpunode.playbook import Playbook, load_playbook
from gpunode.playbook.validate import check_arguments
from gpunode.playbook.vartypes import check_var_types


class CloudPlugin(Protocol):
    """One builder: its template and the decisions that differ between clouds (gpunode/clouds/base.py documents
    each)."""

    @property
    def name(self) -> str: ...
    @property
    def template(self) -> str: ...
    @property
    def plugin(self) -> packer_cli.PackerPlugin | None: ...
    @property
    def credentials(self) -> tuple[str, ...]: ...
    @property
    def credentials_help(self) -> str: ...
    @property
    def power_off(self) -> bool: ...

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None: ...
    def default_playbook(self, request: BuildRequest) -> str: ...
    def check_playbook(self, request: BuildRequest, book: Playbook) -> None: ...
    def needs_ecs_agent(self, request: BuildRequest) -> bool: ...
    def image_name(self, name: str, build_id: str, given: bool) -> str: ...
    def template_vars(self, build: _Build) -> dict[str, Any]: ...
    def resolve(self, request: BuildRequest, variables: dict[str, Any]) -> dict[str, Any]: ...
    def run(self, build: _Build, staged: Path, variables: dict[str, Any], var_file: Path, result: BuildResult,
            out: Callable[[str], None]) -> BuildResult: ...
    def artifact(self, build: _Build, run: packer_cli.PackerRun) -> str: ...
    def cloud_tags(self, tags: dict[str, str]) -> dict[str, str]: ...
    def tag_image(self, build: _Build, result: BuildResult) -> str: ...


@dataclass
class AwsOptions:
    """What only AWS builds take: another EC2 endpoint (a local moto_server) and the files to write beside the AMI
    (launch template, Batch compute environment, queue, job definition, job) with the user's network and roles."""

    endpoint: str | None = None
    outputs: BatchRequest = field(default_factory=BatchRequest)


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
    verify: str = "auto"
    expect_gpus: int | None = None
    min_free_gb: float = 2.0
    validate_only: bool = False
    aws: AwsOptions = field(default_factory=AwsOptions)  # what only AWS builds take
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
    cloud: CloudPlugin
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
        """The image name as the cloud accepts it (it is also the Name tag and the record's)."""
        name = self.request.name or f"gpunode-{self.book.name}-{self.request.base}-{self.build_id}"
        return self.cloud.image_name(name, self.build_id, bool(self.request.name))

    @property
    def keypair_name(self) -> str:
        return f"gpunode-build-{self.build_id}"

    def static_tags(self) -> dict[str, str]:
        return static_tags(self.name, self.build_id, self.request.base, self.book.path, self.book.sha256,
                           self.request.driver_branch)


def build_image(request: BuildRequest, cloud: CloudPlugin, out: Callable[[str], None] = print) -> BuildResult:
    """Run one image build on the builder's plug-in (gpunode.clouds.cloud(request.builder)); raises GpunodeError
    naming the failed step (on the instance or in Packer)."""
    if request.verify not in ("auto", "always", "never"):
        raise UsageError(f"--verify must be auto, always or never, not {request.verify!r}")
    given = {"region": request.region, "instance_type": request.instance_type, **parse_vars(request.packer_vars)}
    cloud.check_request(request, given)
    packer_cli.check_variables(cloud, request.builder, given)
    build = _prepare(request, cloud)
    try:  # a build that never starts keeps no folder (and so no private key); --validate-only never starts one
        variables = _template_vars(build)
        staged = packer_cli.stage(cloud, build.packer, build.directory / "packer")
        var_file = packer_cli.write_var_file(variables, build.directory / "vars.pkrvars.hcl")
        packer_cli.ensure_plugins(cloud, build.packer, staged, out)
        packer_cli.validate(build.packer, staged, var_file, cloud)
    except BaseException:
        build.discard()
        raise
    if variables.get("accelerator") == "tcg":
        out("the build VM runs under software emulation (accelerator tcg: no usable /dev/kvm, or asked for), many "
            "times slower than kvm")
    out(f"packer {build.packer.version_text}: {cloud.template} is valid (build {build.build_id})")
    result = BuildResult(build.build_id, build.directory, region=str(variables.get("region", "")))
    if request.validate_only:
        build.discard()
        return result
    out(f"build folder: {build.directory}")
    variables.update(cloud.resolve(request, variables))
    packer_cli.write_var_file(variables, build.directory / "vars.pkrvars.hcl")
    return cloud.run(build, staged, variables, var_file, result, out)


def run_packer(build: _Build, staged: Path, var_file: Path, out: Callable[[str], None]) -> packer_cli.PackerRun:
    """`packer build`, its lines printed as they come."""
    return packer_cli.build(build.packer, staged, var_file, _printer(out))


def finish(build: _Build, run: packer_cli.PackerRun, result: BuildResult, out: Callable[[str], None]) -> BuildResult:
    """The image of a Packer run: its id, its tags as the cloud holds them (put on it by the cloud when Packer could
    not), and the record."""
    result.report = check_run(build, run)
    result.image_id = build.cloud.artifact(build, run)
    result.tags = build.cloud.cloud_tags(honest_base({**build.static_tags(), **version_tags(result.report)}))
    where = build.cloud.tag_image(build, result)
    record(build, result)
    out(f"image {result.image_id}: tags recorded in {build.directory / 'image.json'} ({where})")
    return result


def _prepare(request: BuildRequest, cloud: CloudPlugin) -> _Build:
    request.playbook = request.playbook or cloud.default_playbook(request)
    book = load_playbook(request.playbook)
    cloud.check_playbook(request, book)
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
    build = _Build(request, cloud, packer, book, build_id, directory, made_parents=made)
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
              min_free_gb=request.min_free_gb, power_off=cloud.power_off,
              ecs_agent=cloud.needs_ecs_agent(request)).write()
    return build


def batch_request(request: Any) -> BatchRequest:
    """The launch template and Batch files a build or bake request asks for."""
    return request.aws.outputs if isinstance(request, BuildRequest) else request.outputs


def _template_vars(build: _Build) -> dict[str, Any]:
    """The template's variables: the shared ones, the cloud's, then --packer-var overrides (and, for a real build,
    what the cloud looked up with them)."""
    request = build.request
    variables: dict[str, Any] = {"build_dir": str(build.directory), "gpunode_python": sys.executable,
                                 "save_packer_key": not build.key_file}
    if request.region:
        variables["region"] = request.region
    if request.instance_type:
        variables["instance_type"] = request.instance_type
    variables.update(build.cloud.template_vars(build))
    variables.update(parse_vars(request.packer_vars))
    if not request.validate_only:
        variables.update(build.cloud.resolve(request, variables))
    return variables


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


def check_run(build: _Build, run: packer_cli.PackerRun) -> BuildReport:
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


def first_artifact_id(build: _Build, run: packer_cli.PackerRun) -> str:
    """The first artifact id Packer listed (or its manifest holds)."""
    ids = run.artifacts.ids() or packer_cli.manifest_artifact_ids(build.directory / "manifest.json")
    if not ids:
        raise GpunodeError("packer reported no artifact", step="packer", fix="read Packer's output above")
    return ids[0]


def record(build: _Build, result: BuildResult) -> None:
    """image.json: what was built, its tags and the files written beside it."""
    record = {"build_id": build.build_id, "builder": build.request.builder, "image_id": result.image_id,
              "region": result.region, "name": build.name, "tags": result.tags,
              "outputs": [str(p) for p in result.outputs]}
    (build.directory / "image.json").write_text(json.dumps(record, indent=2) + "\n")
