"""AWS facts the Batch/ECS path rests on, each with the vendor file or page it was read from.

Re-check any entry: open the repository file at that commit and line (or the page). The AMI names come from
aws/amazon-ecs-ami's Packer templates (what AWS builds the ECS-optimized AMIs with) and its release notes; the
ECS agent's configuration and runtime from aws/amazon-ecs-agent; Batch's enums from botocore's service model.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Source, fact_table

ECS_AMI = "aws/amazon-ecs-ami"
ECS_AMI_REF = "a2532d3503f2052a09ac18189b0de33918406db8"
ECS_AGENT = "aws/amazon-ecs-agent"
ECS_AGENT_REF = "8dfceca6cf380a83c3007349317566f2862f0673"
BOTOCORE = "boto/botocore"
BOTOCORE_REF = "1.44.8"  # installed with gpunode[aws]; the model ships in it as service-2.json.gz
BATCH_MODEL = "botocore/data/batch/2016-08-10/service-2.json"
EC2_MODEL = "botocore/data/ec2/2016-11-15/service-2.json"
BATCH_LT_DOC = "https://docs.aws.amazon.com/batch/latest/userguide/launch-templates.html"
RELEASE_NOTES = "https://github.com/aws/amazon-ecs-ami/releases/tag/20261113"
SSM_DOC = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/retrieve-ecs-optimized_AMI.html"
AL2023_NAMING = "https://docs.aws.amazon.com/linux/al2023/ug/naming-and-versioning.html"


def _ami(path: str, line: str) -> Source:
    return Source(ECS_AMI, path, ECS_AMI_REF, line)


def _agent(path: str, line: str) -> Source:
    return Source(ECS_AGENT, path, ECS_AGENT_REF, line)


AWS = fact_table("aws", {
    # AMI names: "<prefix>-hvm-2023.0.<version><kernel>-x86_64" (al2023.pkr.hcl) and "<prefix>-gpu-hvm-...-x86_64-ebs"
    # (al2023gpu.pkr.hcl: only the GPU AMI ends in -ebs); AWS's releases use the prefix al2023-ami-ecs.
    "ecs_ami_name_prefix": Fact("al2023-ami-ecs", Source(url=RELEASE_NOTES),
                                "release 20261113 lists al2023-ami-ecs-hvm-2023.0.20261113-kernel-6.1-x86_64 and "
                                "al2023-ami-ecs-gpu-hvm-2023.0.20261113-kernel-6.1-x86_64-ebs"),
    "ecs_ami_name": Fact("{prefix}-hvm-2023.0.{version}{kernel}-x86_64", _ami("al2023.pkr.hcl", "2"),
                         "local ami_name_al2023: no suffix after the architecture"),
    "ecs_gpu_ami_name": Fact("{prefix}-gpu-hvm-2023.0.{version}{kernel}-x86_64-ebs", _ami("al2023gpu.pkr.hcl", "2"),
                             "local ami_name_al2023gpu: the GPU AMI ends in -ebs"),
    "ecs_ami_kernel": Fact("-kernel-6.1", _ami("release-al2023.auto.pkrvars.hcl", "10"),
                           "kernel_version_al2023 of the current release"),
    "ecs_ami_owner": Fact("amazon", _ami("variables.pkr.hcl", "132-136"),
                          "source_ami_owners defaults to the owner alias amazon (Amazon's own AMIs)"),
    "ecs_ami_most_recent": Fact(True, _ami("al2023gpu.pkr.hcl", "31-38"),
                                "source_ami_filter: a name filter, owners, most_recent = true"),
    # AWS's own pointer to the current ECS-optimized AMI (the vendor's scripts read the parent parameter)
    "ssm_ecs_al2023": Fact("/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
                           Source(ECS_AMI, "scripts/check-update-security.sh", ECS_AMI_REF, "25", url=SSM_DOC),
                           "AL2023_PATH; the image_id sub-parameter holds the AMI id (SSM doc)"),
    "ssm_ecs_al2023_gpu": Fact("/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id",
                               Source(ECS_AMI, "scripts/check-update-security.sh", ECS_AMI_REF, "27", url=SSM_DOC),
                               "AL2023_GPU_PATH; the image_id sub-parameter holds the AMI id (SSM doc)"),
    # ECS agent configuration
    "ecs_gpu_key": Fact("ECS_ENABLE_GPU_SUPPORT", _agent("agent/config/config.go", "590"),
                        "GPUSupportEnabled is parsed from this variable, false when unset"),
    "ecs_gpu_value": Fact("true", _ami("scripts/al2023/gpu/enable-ecs-agent-gpu-support-al2023.sh", "11"),
                          "the GPU AMI's build writes ECS_ENABLE_GPU_SUPPORT=true"),
    "ecs_instance_config": Fact("/var/lib/ecs/ecs.config", _agent("ecs-init/config/common.go", "333-336"),
                                "InstanceConfigFile: Amazon's per-image settings; the GPU AMI writes its key here "
                                "(enable-ecs-agent-gpu-support-al2023.sh:12)"),
    "ecs_user_config": Fact("/etc/ecs/ecs.config", _agent("ecs-init/config/common.go", "168-171"),
                            "AgentConfigFile: the user's settings (user data appends ECS_CLUSTER here)"),
    "ecs_config_precedence": Fact("user-over-instance", _agent("ecs-init/docker/docker.go", "400-426"),
                                  "LoadEnvVars merges the instance file, then the user file over it; a GPU key of "
                                  "true in the instance file is dropped when no NVIDIA device appears"),
    "ecs_config_syntax": Fact("KEY=VALUE", _agent("ecs-init/docker/docker.go", "438-456"),
                              "getEnvVars: each trimmed line split at the first '='; key and value kept as written"),
    "ecs_service": Fact("ecs.service", _agent("packaging/amazon-linux-ami-integrated/ecs.service", "28-31"),
                        "reads /etc/ecs/ecs.config as EnvironmentFile, starts /usr/libexec/amazon-ecs-init"),
    # the Docker runtime every GPU container of a task gets
    "ecs_nvidia_runtime": Fact("nvidia", _agent("agent/config/config.go", "140"),
                               "DefaultNvidiaRuntime; the Linux default config sets NvidiaRuntime to it "
                               "(config_unix.go:129), ECS_NVIDIA_RUNTIME overrides (config.go:593)"),
    "ecs_runtime_key": Fact("ECS_NVIDIA_RUNTIME", _agent("agent/config/config.go", "593"),
                            "NvidiaRuntime read from this variable (the runtime name GPU containers get)"),
    "ecs_runtime_use": Fact("HostConfig.Runtime", _agent("agent/api/task/task.go", "2128-2138"),
                            "a GPU container's host config gets Runtime = the nvidia runtime name; Docker refuses "
                            "to create the container when it has no runtime of that name"),
})

# Amazon Linux's base AMIs (gpunode/distros/al2023.py); the other distros' AMI facts are in their adapters.
AWS_BASE_AMIS = fact_table("aws-base-amis", {
    "al2023_name": Fact("al2023-ami-2023.*{kernel}-x86_64", Source(url=AL2023_NAMING),
                        "AL2023 AMIs are named al2023-ami-2023.<minor>.<date>.<n>-kernel-6.1-x86_64"),
    "al2023_kernel": Fact("-kernel-6.1", _ami("CHANGELOG.md", "13"),
                          "AWS's own ECS AMI release 20260820 still starts from al2023-ami-minimal-2023.12.20260817.0-"
                          "kernel-6.1-x86_64: 6.1 AMIs are still published and are the ECS bases' kernel line "
                          "(release-al2023.auto.pkrvars.hcl:10); AL2023's default kernel (SSM ...-kernel-default) is "
                          "6.1. EKS builds from 6.12/6.18 (awslabs/amazon-eks-ami templates/al2023/"
                          "variables-default.json@81fec2e:31); gpunode handles kernel6.12/6.18 hosts too"),
    "al2023_owner": Fact("amazon", _ami("variables.pkr.hcl", "132-136"),
                         "source_ami_owners of AWS's own AL2023 builds: the owner alias amazon"),
})

AWS_BATCH = fact_table("aws-batch", {
    "image_type_al2023_gpu": Fact("ECS_AL2023_NVIDIA", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "2594"),
                                  "Ec2Configuration.imageType: default for all GPU instance families, usable for "
                                  "all non-Graviton instance types (not p3/g3); line of the model as installed "
                                  "(batch/2016-08-10/service-2.json.gz, decompressed)"),
    "image_type_al2_gpu": Fact("ECS_AL2_NVIDIA", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "2594"),
                               "Amazon Linux 2 (GPU); AWS ended ECS AL2 AMIs on June 30, 2026 and Batch blocks "
                               "new environments on Batch-provided AL2 AMIs from then"),
    # the compute environment gpunode writes (--batch): what Batch needs of a managed EC2 environment
    "ce_subnets_required": Fact("subnets", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "1197-1199"),
                                "ComputeResource.subnets: required for EC2, SPOT, FARGATE and FARGATE_SPOT compute "
                                "environments (--subnet, exit 2 without)"),
    "ce_security_groups": Fact("securityGroupIds", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "1201-1203"),
                               "one or more security groups, in securityGroupIds or in the launch template; gpunode's "
                               "launch template has none, so --security-group is needed"),
    "ce_instance_role": Fact("instanceRole", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "1209-1211"),
                             "the ECS instance profile, required for EC2 instance types: short name (ecsInstanceRole) "
                             "or ARN (--instance-role)"),
    "ce_service_role": Fact("serviceRole", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "1726-1728"),
                            "optional: without it Batch uses (or creates) its service-linked role (--service-role)"),
    "launch_template_ref": Fact("launchTemplateName", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "4436-4460"),
                                "LaunchTemplateSpecification: the template's id or its name, not both, and a version"),
    "launch_template_version": Fact("$Default", Source(BOTOCORE, BATCH_MODEL, BOTOCORE_REF, "4447-4449"),
                                    "version: a number, $Default or $Latest; $Default is the template's default "
                                    "version (the first one, as gpunode's file creates it)"),
    "launch_template_mime": Fact("multipart/mixed", Source(BOTOCORE, EC2_MODEL, BOTOCORE_REF, "69730",
                                                           url=BATCH_LT_DOC),
                                 "RequestLaunchTemplateData.UserData: base64, at most 16 KB; for Batch it must be a "
                                 "MIME multi-part archive (Batch's page: 'Amazon EC2 user data in launch templates')"),
})


def fact(key: str) -> str:
    """The value of one AWS fact (any of the tables)."""
    return str((AWS.get(key) or AWS_BASE_AMIS.get(key) or AWS_BATCH[key]).value)
