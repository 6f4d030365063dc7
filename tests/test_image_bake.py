"""`bake`: an AMI from an instance provisioned already — cleanup and validation on a lab host, EC2 on moto_server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import LAB_SUBNET, host_inventory, run_cli
from tests.image_support import AWS_ENV, ec2_client, moto_server, own_images

pytestmark = pytest.mark.lab


@pytest.fixture
def moto():
    with moto_server() as endpoint:
        yield endpoint


def launch(ec2, private_ip: str | None = None) -> str:
    """An instance in moto standing for the lab host (at its address when given)."""
    vpc = ec2.create_vpc(CidrBlock="10.231.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=LAB_SUBNET)["Subnet"]["SubnetId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    extra = {"PrivateIpAddress": private_ip} if private_ip else {}
    return ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="g5.xlarge", SubnetId=subnet,
                             **extra)["Instances"][0]["InstanceId"]


def bake(moto: str, tmp_path: Path, inventory: Path, host: str, *extra: str):
    env = {**AWS_ENV, "GPUNODE_BUILDS": str(tmp_path / "builds")}
    return run_cli("bake", host, "-i", str(inventory), "--endpoint", moto, *extra, env=env)


def test_bake_finds_the_instance_by_address_cleans_stops_images_and_tags(lab, fresh_host, moto, tmp_path) -> None:
    ec2 = ec2_client(moto)
    instance_id = launch(ec2, fresh_host.address)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    template = tmp_path / "lt.json"
    result = bake(moto, tmp_path, inventory, fresh_host.name, "--name", "baked-node", "--playbook",
                  "playbooks/base.yml", "--launch-template", str(template))
    assert result.code == 0, result.output
    assert f"{fresh_host.name} is {instance_id}" in result.output

    (image,) = own_images(ec2)
    tags = {t["Key"]: t["Value"] for t in image["Tags"]}
    assert image["Name"] == "baked-node" and tags["gpunode:baked-from"] == instance_id
    assert tags["gpunode:playbook"] == "base.yml" and len(tags["gpunode:playbook-sha256"]) == 64
    assert tags["gpunode:os"] == "debian-12" and tags["gpunode:driver"] == "none"
    state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "stopped"
    assert json.loads(template.read_text())["LaunchTemplateData"]["ImageId"] == image["ImageId"]
    # cleaned: the key gpunode connected with is gone, the machine id is empty
    assert fresh_host.run_inside("wc -c < /etc/machine-id").stdout.strip() == "0"
    assert "AAAA" not in fresh_host.run_inside("cat /home/gpunode/.ssh/authorized_keys 2>/dev/null").stdout


def test_bake_by_instance_id_keeping_the_key_and_refusing_unknown_hosts(lab, fresh_host, moto, tmp_path) -> None:
    ec2 = ec2_client(moto)
    instance_id = launch(ec2)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", instance_id=instance_id)
    result = bake(moto, tmp_path, inventory, fresh_host.name, "--name", "kept-key", "--keep-key")
    assert result.code == 0, result.output
    (image,) = own_images(ec2)
    assert image["Name"] == "kept-key"
    assert "AAAA" in fresh_host.run_inside("cat /home/gpunode/.ssh/authorized_keys").stdout

    unknown = host_inventory(lab, [], tmp_path / "unknown.yml", extra_hosts={"ghost": "10.231.80.250"})
    missing = bake(moto, tmp_path, unknown, "ghost", "--name", "nothing")
    assert missing.code == 2 and "no EC2 instance has the address 10.231.80.250" in missing.output
    assert bake(moto, tmp_path, inventory, fresh_host.name).code == 2  # --name is required


def test_bake_for_aws_batch_checks_the_ecs_agent_and_writes_a_valid_environment(lab, fresh_host, moto,
                                                                               tmp_path) -> None:
    from tests.batch_support import CALLS, listed_jobs, network_options, submit_all, user_network
    from tests.test_image_aws_json import problems
    from tests.test_image_lab import ECS_AGENT

    ec2 = ec2_client(moto)
    launch(ec2, fresh_host.address)
    assert fresh_host.run_inside(ECS_AGENT).returncode == 0
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    files = {command: tmp_path / f"{command}.json" for _, command in CALLS}
    batch = files["create-compute-environment"]
    result = bake(moto, tmp_path, inventory, fresh_host.name, "--name", "batch-node", "--batch", str(batch),
                  "--launch-template", str(files["create-launch-template"]),
                  "--batch-job-queue", str(files["create-job-queue"]),
                  "--batch-job-definition", str(files["register-job-definition"]), "--job-image", "nvidia/cuda:12.4.1-"
                  "base-ubuntu22.04", "--batch-job", str(files["submit-job"]), *network_options(user_network(moto)))
    assert result.code == 0, result.output
    (build_dir,) = (tmp_path / "builds").iterdir()
    finalize = json.dumps(json.loads((build_dir / "report.json").read_text())["runs"]["finalize"])
    assert "ECS agent enabled, its configuration present" in finalize  # the ECS checks ran and passed
    (image,) = own_images(ec2)
    environment = json.loads(batch.read_text())
    assert problems("batch", "CreateComputeEnvironment", environment) == ""
    # the instance runs Debian 12: ECS_AL2023_NVIDIA serves every non-Graviton GPU type (botocore batch model)
    assert environment["computeResources"]["ec2Configuration"] == [
        {"imageType": "ECS_AL2023_NVIDIA", "imageIdOverride": image["ImageId"]}]  # all but AL2 (vendor_aws.AWS_BATCH)
    assert fresh_host.run_inside("ls -A /var/lib/ecs/data").stdout.strip() == ""  # the agent's state not baked
    # the five files as bake wrote them, submitted to moto unmodified: the job is listed on the queue
    submit_all(moto, files)
    assert [job["jobName"] for job in listed_jobs(moto, "batch-node")] == ["batch-node"]
    assert environment["computeResources"]["launchTemplate"] == {"launchTemplateName": "batch-node",
                                                                 "version": "$Default"}
