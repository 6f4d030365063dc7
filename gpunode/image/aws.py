"""EC2 through boto3: the build's key pair, tagging and removing AMIs, baking an image from a running instance.

Credentials and region come from the SDK's usual chain (AWS_PROFILE, AWS_ACCESS_KEY_ID..., ~/.aws, instance role);
`endpoint` points at another EC2 endpoint (tests: a local moto_server).
"""

from __future__ import annotations

from typing import Any

from gpunode.errors import GpunodeError, UsageError
from gpunode.image.tags import as_aws

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def require_boto3() -> None:
    """AWS builds and bakes need boto3, the `aws` extra: refused (exit 2) before anything is made."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise UsageError("boto3 is not installed (build-ami and bake talk to EC2 with it)",
                         fix="pip install 'gpunode[aws]' (or pip install boto3)") from None


def ec2_client(region: str, endpoint: str | None = None) -> Any:
    require_boto3()
    import boto3

    return boto3.client("ec2", region_name=region, endpoint_url=endpoint or None)


def ssm_client(region: str, endpoint: str | None = None) -> Any:
    """Systems Manager (AWS's public AMI parameters); `endpoint` as for EC2 (moto_server serves both)."""
    import boto3
    from botocore.config import Config

    quick = Config(connect_timeout=10, read_timeout=20, retries={"max_attempts": 2})  # a fallback exists: fail fast
    return boto3.client("ssm", region_name=region, endpoint_url=endpoint or None, config=quick)


def recommended_ami(ssm: Any, ec2: Any, parameter: str) -> tuple[str, str] | str:
    """(AMI id, name) that AWS's public SSM parameter names, when it resolves to an image of this region; else why
    not (the caller falls back to the name filter: newest match)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        image_id = ssm.get_parameter(Name=parameter)["Parameter"]["Value"].strip()
        images = ec2.describe_images(ImageIds=[image_id])["Images"] if image_id.startswith("ami-") else []
    except (BotoCoreError, ClientError) as exc:
        return str(exc)
    if not images:
        return f"it names {image_id!r}, which is no image of this region"
    return image_id, str(images[0].get("Name", ""))


def _call(what: str, fn: Any, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    try:
        return fn(**kwargs)
    except (BotoCoreError, ClientError, ResponseParserError) as exc:
        raise GpunodeError(f"EC2 {what} failed: {exc}", step="ec2", fix="check the credentials (AWS_PROFILE, "
                           "~/.aws), the region and the IAM permissions") from None


def import_key_pair(ec2: Any, name: str, public_line: str, tags: dict[str, str]) -> None:
    _call("ImportKeyPair", ec2.import_key_pair, KeyName=name, PublicKeyMaterial=public_line.encode(),
          TagSpecifications=[{"ResourceType": "key-pair", "Tags": as_aws(tags)}])


def delete_key_pair(ec2: Any, name: str) -> None:
    _call("DeleteKeyPair", ec2.delete_key_pair, KeyName=name)


def image_snapshots(ec2: Any, image_id: str) -> list[str]:
    images = _call("DescribeImages", ec2.describe_images, ImageIds=[image_id])["Images"]
    return [m["Ebs"]["SnapshotId"] for i in images for m in i.get("BlockDeviceMappings", [])
            if m.get("Ebs", {}).get("SnapshotId")]


def tag_image(ec2: Any, image_id: str, tags: dict[str, str]) -> None:
    """Tag the AMI and its snapshots."""
    _call("CreateTags", ec2.create_tags, Resources=[image_id, *image_snapshots(ec2, image_id)], Tags=as_aws(tags))


def remove_image(ec2: Any, image_id: str) -> None:
    """Deregister the AMI and delete its snapshots (a build that failed after capture leaves nothing)."""
    snapshots = image_snapshots(ec2, image_id)
    _call("DeregisterImage", ec2.deregister_image, ImageId=image_id)
    for snapshot in snapshots:
        _call("DeleteSnapshot", ec2.delete_snapshot, SnapshotId=snapshot)


def build_leftovers(ec2: Any, build_id: str) -> list[str]:
    """Instances of this build that are not terminated (after a build, there must be none)."""
    found = _call("DescribeInstances", ec2.describe_instances, Filters=[
        {"Name": "tag:gpunode:build-id", "Values": [build_id]},
        {"Name": "instance-state-name", "Values": LIVE_STATES}])
    return [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]


def find_instance(ec2: Any, address: str | None = None, instance_id: str | None = None) -> dict[str, Any]:
    """The instance with this id, or with this private / public IP address."""
    queries: list[dict[str, Any]]
    if instance_id:
        queries = [{"InstanceIds": [instance_id]}]
    else:
        live = {"Name": "instance-state-name", "Values": LIVE_STATES}
        queries = [{"Filters": [{"Name": "private-ip-address", "Values": [address]}, live]},
                   {"Filters": [{"Name": "ip-address", "Values": [address]}, live]}]
    for query in queries:
        found = _call("DescribeInstances", ec2.describe_instances, **query)
        instances = [i for r in found["Reservations"] for i in r["Instances"]]
        if len(instances) > 1:
            raise UsageError(f"{len(instances)} instances match {address}",
                             fix="set the host's instance_id variable in the inventory")
        if instances:
            return instances[0]
    raise UsageError(f"no EC2 instance has the address {address or instance_id} in this region",
                     fix="check --region, or set the host's instance_id variable in the inventory")


def stop_instance(ec2: Any, instance_id: str, timeout: int = 900) -> None:
    _call("StopInstances", ec2.stop_instances, InstanceIds=[instance_id])
    _wait(ec2, "instance_stopped", timeout, InstanceIds=[instance_id])


def create_image(ec2: Any, instance_id: str, name: str, description: str, tags: dict[str, str],
                 timeout: int = 3600) -> str:
    """CreateImage from a stopped instance, tagged from the start, waited until available; then its snapshots."""
    spec = [{"ResourceType": "image", "Tags": as_aws(tags)}]
    image_id = _call("CreateImage", ec2.create_image, InstanceId=instance_id, Name=name, Description=description,
                     NoReboot=True, TagSpecifications=spec)["ImageId"]
    _wait(ec2, "image_available", timeout, ImageIds=[image_id])
    tag_image(ec2, image_id, tags)  # snapshots exist once the image does
    return image_id


def _wait(ec2: Any, waiter: str, timeout: int, **kwargs: Any) -> None:
    from botocore.exceptions import WaiterError

    delay = 5
    try:
        ec2.get_waiter(waiter).wait(WaiterConfig={"Delay": delay, "MaxAttempts": max(1, timeout // delay)}, **kwargs)
    except WaiterError as exc:
        raise GpunodeError(f"EC2 waiting for {waiter.replace('_', ' ')} failed: {exc}", step="ec2",
                           fix="look at the instance or image in the EC2 console") from None
