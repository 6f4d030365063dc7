# An AWS GPU node AMI (amazon-ebs), provisioned by gpunode itself: the same playbook `gpunode provision` runs,
# then image_cleanup and image_validate (and verify-gpu when the build instance has GPUs).
#
# Run it through the toolkit: `invoke build-ami` (or `gpunode build-ami`) writes the build spec
# (<build_dir>/build.json: playbook, variables, report paths), owns the SSH key and tags the AMI afterwards.
# Credentials come from the AWS SDK's usual places (AWS_PROFILE, AWS_ACCESS_KEY_ID/..., ~/.aws, instance role);
# nothing secret is written here. Works on Debian's packer 1.6.6 (built-in amazon-ebs) and on Packer 1.7+
# with the amazon plugin (staged by the toolkit on modern Packer). The build block is
# packer/build.pkr.hcl.in, shared by every template.

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "instance_type" {
  type    = string
  default = "g5.xlarge"
}

variable "source_ami" {
  type        = string
  default     = ""
  description = "An exact base AMI id; when empty, the newest AMI matching source_ami_name/owners."
}

variable "source_ami_name" {
  type        = string
  description = "The base's AMI name filter (from the distro adapter of --base)."
}

variable "source_ami_owners" {
  type        = list(string)
  description = "The base's AMI owner accounts (from the distro adapter of --base)."
}

variable "ssh_username" {
  type        = string
  description = "The base image's login (from the distro adapter of --base)."
}

variable "ssh_keypair_name" {
  type        = string
  default     = ""
  description = "The EC2 key pair the toolkit imported for this build (empty: Packer makes a temporary one)."
}

variable "ssh_private_key_file" {
  type    = string
  default = ""
}

variable "ssh_host" {
  type        = string
  default     = ""
  description = "Override the address Packer and gpunode connect to (empty: the instance's)."
}

variable "ssh_port" {
  type    = number
  default = 22
}

variable "ssh_timeout" {
  type        = string
  default     = "15m"
  description = "How long Packer waits for SSH on the build instance."
}

variable "ssh_interface" {
  type        = string
  default     = ""
  description = "public_ip, private_ip, public_dns or private_dns (empty: Packer's choice)."
}

variable "subnet_id" {
  type    = string
  default = ""
}

variable "aws_endpoint" {
  type        = string
  default     = ""
  description = "A custom EC2 endpoint (e.g. a local moto_server in tests); skips credential checks."
}

variable "ami_name" {
  type    = string
  default = "gpunode-gpu-node"
}

variable "ami_description" {
  type    = string
  default = "GPU node image baked by gpunode"
}

variable "root_device_name" {
  type    = string
  default = "/dev/sda1"
}

variable "volume_size_gb" {
  type    = number
  default = 64
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags for the AMI, its snapshots and the build instance (versions are added after the build)."
}

source "amazon-ebs" "gpu-node" {
  region        = var.region
  instance_type = var.instance_type
  source_ami    = var.source_ami

  dynamic "source_ami_filter" {
    for_each = var.source_ami == "" ? [1] : []
    content {
      filters = {
        name                = var.source_ami_name
        virtualization-type = "hvm"
        root-device-type    = "ebs"
      }
      owners      = var.source_ami_owners
      most_recent = true
    }
  }

  subnet_id = var.subnet_id
  # Unset (null) without a subnet: an explicit false makes the amazon plugin (>= 1.0, step_network_info.go) pick
  # the default VPC's subnet and launch with no public IP, so SSH would time out.
  associate_public_ip_address = var.subnet_id == "" ? null : var.ssh_interface != "private_ip"

  launch_block_device_mappings {
    device_name           = var.root_device_name
    volume_size           = var.volume_size_gb
    volume_type           = "gp3"
    iops                  = 3000 # gp3's baseline (packer 1.6 needs them spelled out)
    throughput            = 125
    delete_on_termination = true
  }

  ami_name          = var.ami_name
  ami_description   = var.ami_description
  tags              = var.tags
  snapshot_tags     = var.tags
  run_tags          = merge(var.tags, { Name = "gpunode image build ${var.ami_name}" })
  run_volume_tags   = var.tags
  shutdown_behavior = "terminate"
  ena_support       = true
  sriov_support     = true

  communicator         = "ssh"
  ssh_username         = var.ssh_username
  ssh_keypair_name     = var.ssh_keypair_name
  ssh_private_key_file = var.ssh_private_key_file
  ssh_host             = var.ssh_host
  ssh_port             = var.ssh_port
  ssh_interface        = var.ssh_interface
  ssh_timeout          = var.ssh_timeout

  custom_endpoint_ec2        = var.aws_endpoint
  skip_credential_validation = var.aws_endpoint != ""
  skip_region_validation     = var.aws_endpoint != ""
  skip_metadata_api_check    = var.aws_endpoint != ""
}
