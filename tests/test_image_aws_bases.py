"""`build-ami --base B` finds the newest base AMI of B, with real Packer (amazon-ebs) asking a local moto_server.

moto holds AMIs registered under the names the vendors publish, several release dates each, in shuffled order, and
decoys that a loose filter would take. The ECS-optimized names follow aws/amazon-ecs-ami's templates
(al2023.pkr.hcl line 2: `<prefix>-hvm-2023.0.<date>-kernel-6.1-x86_64`; al2023gpu.pkr.hcl line 2: the same with
`-gpu-hvm-` and a trailing `-ebs`; commit a2532d3503f2052a09ac18189b0de33918406db8) with AWS's release prefix
`al2023-ami-ecs` (release notes https://github.com/aws/amazon-ecs-ami/releases/tag/20261113). Packer stops at SSH
(a closed loopback port, ssh_timeout 2s): what it found and launched is what a real build would start from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.image.bases import AWS_BASES
from tests.conftest import run_cli
from tests.image_support import AWS_ENV, _free_port, ec2_client, moto_server, require_packer

AMAZON, CANONICAL, DEBIAN = "591542846629", "099720109477", "136693071363"  # moto gives every loaded AMI alias amazon
DATES = ["20250304", "20261113", "20260805"]  # registered in this order: the newest is neither first nor last


def ecs_name(date: str, gpu: bool = False, arch: str = "x86_64", variant: str = "") -> str:
    """An ECS-optimized AL2023 AMI name as aws/amazon-ecs-ami's al2023*.pkr.hcl (line 2) build it."""
    kind = "-gpu" if gpu else variant
    return f"al2023-ami-ecs{kind}-hvm-2023.0.{date}-kernel-6.1-{arch}{'-ebs' if gpu else ''}"


NAMES: dict[str, tuple[str, list[str], list[str]]] = {  # base -> owner, names per DATES, decoys
    # decoys are newer than every real name: a filter that matched them would take them (each ECS base's real
    # names are also decoys of the other, see test_the_filters_are_the_vendor_names)
    "al2023-ecs-gpu": (AMAZON, [ecs_name(d, gpu=True) for d in DATES],
                       [ecs_name("20261201", variant="-neuron"), ecs_name("20261201", arch="arm64")]),
    "al2023-ecs": (AMAZON, [ecs_name(d) for d in DATES],
                   [ecs_name("20261201", arch="arm64"), ecs_name("20261201", variant="-neuron")]),
    "al2023": (AMAZON, [f"al2023-ami-2023.9.{d}.0-kernel-6.1-x86_64" for d in DATES],
               ["al2023-ami-minimal-2023.9.20261201.0-kernel-6.1-x86_64",
                "al2023-ami-2023.9.20261201.0-kernel-6.12-x86_64"]),
    "ubuntu-22.04": (CANONICAL, [f"ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-{d}" for d in DATES],
                     ["ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-arm64-server-20261201"]),
    "ubuntu-24.04": (CANONICAL, [f"ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-{d}" for d in DATES],
                     ["ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-arm64-server-20261201"]),
    # Debian's release AMIs are debian-<release_id>-<arch>-<date>-<n> (GoCarrot/debian-cloud-images, a copy of Debian's
    # cloud team repository, @0bfa862: images/publicinfo.py:22-28, cli/build.py:202-206); daily and backports images
    # carry -daily- and -backports- (publicinfo.py:14-20, build.py:131-137)
    "debian-12": (DEBIAN, [f"debian-12-amd64-{d}-1234" for d in DATES],
                  ["debian-12-arm64-20261201-1234", "debian-12-amd64-daily-20261201-1234",
                   "debian-12-backports-amd64-20261201-1234", "debian-11-amd64-20261201-1234"]),
    "debian-13": (DEBIAN, [f"debian-13-amd64-{d}-2345" for d in DATES],
                  ["debian-13-arm64-20261201-2345", "debian-13-amd64-daily-20261201-2345"]),
}


def _ami(index: int, name: str, owner: str, date: str) -> dict:
    return {"ami_id": f"ami-{index:017x}", "name": name, "owner_id": owner, "state": "available",
            "public": True, "architecture": "arm64" if "arm64" in name else "x86_64", "virtualization_type": "hvm",
            "root_device_type": "ebs", "root_device_name": "/dev/xvda", "description": name,
            "creation_date": f"{date[:4]}-{date[4:6]}-{date[6:]}T00:49:18.000Z"}


def registered(extra: list[dict] | None = None) -> tuple[list[dict], dict[str, str]]:
    """moto's AMI list (MOTO_AMIS_PATH format) and, per base, the id of its newest AMI."""
    amis, newest = list(extra or []), {}
    for owner, names, decoys in NAMES.values():
        for name, date in [*zip(names, DATES, strict=True), *((d, "20261201") for d in decoys)]:
            amis.append(_ami(len(amis) + 1, name, owner, date))
    for base, (_, names, _) in NAMES.items():
        newest[base] = next(a["ami_id"] for a in amis if a["name"] == names[DATES.index(max(DATES))])
    return amis, newest


@pytest.fixture(scope="module")
def amis(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    require_packer()
    listing, newest = registered()
    path = tmp_path_factory.mktemp("moto") / "amis.json"
    path.write_text(json.dumps(listing))
    with moto_server({"MOTO_AMIS_PATH": str(path)}) as endpoint:
        yield endpoint, newest


def build_until_ssh(endpoint: str, base: str, builds: Path) -> tuple[int, str]:
    """build-ami against moto; Packer resolves the base, launches, then finds no SSH (closed port) and cleans up."""
    result = run_cli("build-ami", "--endpoint", endpoint, "--base", base, "--playbook", "playbooks/base.yml",
                     "--packer-var", "ssh_host=127.0.0.1", "--packer-var", f"ssh_port={_free_port()}",
                     "--packer-var", "ssh_timeout=2s", env={**AWS_ENV, "GPUNODE_BUILDS": str(builds)}, timeout=300)
    return result.code, result.output


def launched(ec2) -> dict[str, str]:
    return {i["InstanceId"]: i["ImageId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}


def test_the_plain_distro_filters_come_from_the_fact_table() -> None:
    """Canonical's documented names and account (canonical/ubuntu-cloud-docs find-ubuntu-images.rst@9a500e6:89-96,
    270-272), AWS's AL2023 naming (https://docs.aws.amazon.com/linux/al2023/ug/naming-and-versioning.html) with the
    6.1 kernel line its ECS AMIs still build from (aws/amazon-ecs-ami CHANGELOG.md@a2532d3:13)."""
    from gpunode.distros import AMI_FACTS as AWS_BASE_AMIS

    assert AWS_BASES["ubuntu-22.04"].name_filter == AWS_BASE_AMIS["ubuntu_jammy_name"].value
    assert AWS_BASES["ubuntu-24.04"].name_filter == AWS_BASE_AMIS["ubuntu_noble_name"].value
    assert AWS_BASES["ubuntu-24.04"].owners == ("099720109477",)
    assert AWS_BASES["al2023"].name_filter == "al2023-ami-2023.*-kernel-6.1-x86_64"
    assert AWS_BASES["debian-13"].name_filter == "debian-13-amd64-20*"


def test_the_template_has_no_base_of_its_own() -> None:
    """aws.pkr.hcl takes the base's AMI filter, owners and login from the distro adapter (gpunode passes them): it
    declares the variables with no default, so no distro fact lives in the template to drift from the adapters'."""
    text = (Path(__file__).parents[1] / "gpunode" / "_packer" / "aws.pkr.hcl").read_text()
    for name in ("source_ami_name", "source_ami_owners", "ssh_username"):
        block = re.search(rf'variable "{name}" \{{(.*?)\n\}}', text, re.S)
        assert block and "default" not in block.group(1), name


def test_the_filters_are_the_vendor_names() -> None:
    """The names of aws/amazon-ecs-ami's releases (GPU: -ebs; plain: none) match; the other variant does not."""
    assert AWS_BASES["al2023-ecs-gpu"].name_filter == "al2023-ami-ecs-gpu-hvm-2023.0.*-kernel-6.1-x86_64-ebs"
    assert AWS_BASES["al2023-ecs"].name_filter == "al2023-ami-ecs-hvm-2023.0.*-kernel-6.1-x86_64"
    for base, (_, names, decoys) in NAMES.items():
        pattern = re.compile(re.escape(AWS_BASES[base].name_filter).replace(r"\*", ".*") + r"\Z")
        assert all(pattern.match(n) for n in names), base
        assert not any(pattern.match(d) for d in decoys), base
    gpu, plain = (re.compile(re.escape(AWS_BASES[b].name_filter).replace(r"\*", ".*") + r"\Z")
                  for b in ("al2023-ecs-gpu", "al2023-ecs"))
    assert not any(gpu.match(n) for n in NAMES["al2023-ecs"][1])
    assert not any(plain.match(n) for n in NAMES["al2023-ecs-gpu"][1])


@pytest.mark.parametrize("base", sorted(NAMES))
def test_build_ami_starts_from_the_newest_base_ami(base: str, amis, tmp_path: Path) -> None:
    endpoint, newest = amis
    ec2 = ec2_client(endpoint)
    before = launched(ec2)
    code, output = build_until_ssh(endpoint, base, tmp_path / "builds")
    assert code == 1, output  # no SSH: the build fails after Packer chose and launched the base
    assert f"Found Image ID: {newest[base]}" in output, output
    started = {k: v for k, v in launched(ec2).items() if k not in before}
    assert list(started.values()) == [newest[base]], output
    if AWS_BASES[base].ssm_parameter:  # moto's SSM value is no image of this moto: the filter decides
        assert f"SSM parameter {AWS_BASES[base].ssm_parameter} not usable" in output


def test_aws_recommended_ami_wins_over_the_newest_name(tmp_path: Path) -> None:
    """AWS's public SSM parameter (aws/amazon-ecs-ami scripts/check-update-security.sh line 27 reads it; image_id is
    the AMI: https://docs.aws.amazon.com/AmazonECS/latest/developerguide/retrieve-ecs-optimized_AMI.html) names the
    AMI to use; moto serves its own value, which the test registers as an older GPU AMI."""
    require_packer()
    parameter = AWS_BASES["al2023-ecs-gpu"].ssm_parameter
    with moto_server() as endpoint:
        import boto3

        ssm = boto3.client("ssm", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
        recommended = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    older = {**_ami(0, ecs_name("20260101", gpu=True), AMAZON, "20260101"), "ami_id": recommended}
    listing, newest = registered([older])
    path = tmp_path / "amis.json"
    path.write_text(json.dumps(listing))
    with moto_server({"MOTO_AMIS_PATH": str(path)}) as endpoint:
        code, output = build_until_ssh(endpoint, "al2023-ecs-gpu", tmp_path / "builds")
        assert code == 1, output
        assert f"base al2023-ecs-gpu: {recommended} ({older['name']}), AWS's recommended AMI ({parameter})" in output
        assert list(launched(ec2_client(endpoint)).values()) == [recommended] != [newest["al2023-ecs-gpu"]]
