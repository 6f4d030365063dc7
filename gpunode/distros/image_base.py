"""What the image builders need of a distro's base image: on AWS the AMI filter and owner, who logs in, the root
device; on every other builder (gpunode/clouds/, by name) who logs in and how the cloud's public image is found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpunode.vendor_aws import fact


@dataclass(frozen=True)
class AwsBase:
    name_filter: str
    owners: tuple[str, ...]
    ssh_username: str
    root_device: str
    ecs_agent: bool = False             # the base ships the ECS agent (what AWS Batch starts jobs through)
    batch_image_type: str = fact("image_type_al2023_gpu")  # Ec2Configuration.imageType of a Batch compute environment
    ssm_parameter: str = ""             # AWS's public SSM parameter naming the current AMI (preferred over the filter)


@dataclass(frozen=True)
class CloudBase:
    """The base on one builder: who logs in, and how its image is found without --source-image."""

    user: str = ""       # empty: the builder logs in as a user it makes itself (gcp: from the instance's metadata)
    lookup: str = ""     # a key of the builder's facts table (public image family, OS name), when it has one
    example: str = ""    # an image id of this kind, for a message asking for --source-image


@dataclass(frozen=True)
class ImageBase:
    """One `--base` name (a distro release): its AMIs, and its image on each other builder (`clouds`, keyed by the
    builder's name: a module of gpunode/clouds/); a builder that is not named does not offer it."""

    aws: AwsBase | None = None
    clouds: Mapping[str, CloudBase] = field(default_factory=dict)
