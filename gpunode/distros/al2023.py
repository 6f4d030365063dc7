"""Amazon Linux 2023: the kernel package lines (kernel6.12...), NVIDIA's amzn2023 repository, the AMIs (plain and
ECS-optimized). Amazon Linux 2 is refused (end of support)."""

from __future__ import annotations

from typing import ClassVar

from gpunode.distros.image_base import AwsBase, ImageBase
from gpunode.distros.repos import CUDA_REPO
from gpunode.distros.rpm import RpmDistro
from gpunode.vendor_aws import fact
from gpunode.vendor_facts import EKS_AMI, Fact, fact_table, value

AL2023 = fact_table("al2023", {
    "kernel_lines": Fact({"6.12": "kernel6.12", "6.18": "kernel6.18"},
        EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "99-106"),
        "the kernel package line of the running kernel: kernel, or kernel6.12/kernel6.18 for those releases "
        "(gpunode reads the line from the RPM owning /lib/modules/<running>, scripts/facts.sh: the same answer "
        "without matching release numbers)"),
    "build_suffixes": Fact(("-devel", "-modules-extra"),
        EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "108-112"),
        "installed for the driver build: <line>-devel and <line>-modules-extra (with -headers and "
        "-modules-extra-common, which the first two do not need for a DKMS build: gpunode leaves them to dnf)"),
})


class Al2023(RpmDistro):
    """Amazon Linux 2023: dnf, kernel lines, no EL major (NVIDIA's amzn2023 folder, Docker from the distro)."""

    ids = ("amzn",)
    matrix_order = 5
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"amzn": ("2023",)}
    refused: ClassVar[dict[tuple[str, str], str]] = {
        ("amzn", "2"): "Amazon Linux 2 reached its end of support on 2026-06-30 (no more kernel or security updates; "
                       "awslabs/amazon-eks-ami removed its AL2 templates) -- use Amazon Linux 2023 (the EKS/ECS "
                       "AL2023 GPU AMIs, or al2023-ami-* with this playbook)",
    }

    def headers_packages(self, kernel: str, kernel_package: str = "") -> list[str]:
        """AL2023 adds -modules-extra to -devel."""
        base = self.kernel_base_package(kernel_package)
        return [f"{base}{suffix}-{kernel}" for suffix in value(AL2023, "build_suffixes")]

    def newest_kernel_packages(self, running: str, kernel_package: str = "") -> list[str]:
        base = self.kernel_base_package(kernel_package)
        return [base, *(f"{base}{suffix}" for suffix in value(AL2023, "build_suffixes"))]

    def cuda_repo_name(self) -> str:
        if self.os.version_id == "2023":
            return value(CUDA_REPO, "amzn2023_folder")
        return super().cuda_repo_name()

    def docker_packages(self) -> tuple[str, ...]:
        return ("docker",)


def _al2023_ami_filter() -> str:
    """The plain AL2023 AMIs of AWS's default kernel line (6.1), not the minimal ones."""
    return fact("al2023_name").format(kernel=fact("al2023_kernel"))


def _ecs_ami_filter(gpu: bool) -> str:
    """The name filter of the ECS-optimized AL2023 AMIs, from aws/amazon-ecs-ami's templates (any release date)."""
    template = fact("ecs_gpu_ami_name" if gpu else "ecs_ami_name")
    return template.format(prefix=fact("ecs_ami_name_prefix"), version="*", kernel=fact("ecs_ami_kernel"))


IMAGE_BASES = {
    "al2023": ImageBase(AwsBase(_al2023_ami_filter(), (fact("al2023_owner"),), "ec2-user", "/dev/xvda")),
    # The ECS-optimized AL2023 AMIs (ECS agent, Docker, containerd): what AWS Batch instances run. The GPU one also
    # carries NVIDIA's driver and container toolkit as AWS ships them.
    "al2023-ecs": ImageBase(AwsBase(_ecs_ami_filter(gpu=False), (fact("ecs_ami_owner"),), "ec2-user", "/dev/xvda",
                                    ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023"))),
    "al2023-ecs-gpu": ImageBase(AwsBase(_ecs_ami_filter(gpu=True), (fact("ecs_ami_owner"),), "ec2-user",
                                        "/dev/xvda", ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023_gpu"))),
}
# The os-release `ID-VERSION_ID`s of Amazon Linux 2 images, whose Batch image type is AL2's own.
AL2_IMAGE_IDS = ("amzn-2", "amzn-2.0")
