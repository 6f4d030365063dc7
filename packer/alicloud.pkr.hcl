# An Alibaba Cloud GPU node image (alicloud-ecs), provisioned by gpunode itself: the same playbook
# `gpunode provision` runs, then image_cleanup and image_validate (and verify-gpu on a GPU build instance).
#
# Run it through the toolkit: `gpunode build-image --builder alicloud` writes <build_dir>/build.json.
# Credentials: ALICLOUD_ACCESS_KEY / ALICLOUD_SECRET_KEY (or the aliyun CLI profile, ALICLOUD_PROFILE); nothing
# secret is written here. The build key is gpunode's own: Alibaba Cloud attaches only key pairs of the account, so
# user_data (a script cloud-init runs) lets it in; image_cleanup removes it again before capture.
# Lines starting with "#gpunode-1.7+ " are arguments of the alicloud plugin that Packer 1.6.6's built-in builder lacks
# (run_tags: the build instance's tags); the toolkit uncomments them when it stages the template for Packer 1.7+.
# The plugin range stays below 1.1.3: from there the plugin creates the instance with RunInstances, which gives it a
# public IP itself, and associate_public_ip_address would then attach an EIP to it as well (cloud_facts.ALICLOUD).

variable "region" {
  type    = string
  default = "cn-hangzhou"
}

variable "instance_type" {
  type    = string
  default = "ecs.gn7i-c8g1.2xlarge" # 1x A10
}

variable "source_image" {
  type        = string
  default     = ""
  description = "The base image id, e.g. ubuntu_22_04_x64_20G_alibase_<date>.vhd (aliyun ecs DescribeImages)."
}

variable "image_family" {
  type        = string
  default     = ""
  description = "Packer 1.7+, without source_image: the base's public image family (--base NAME)."
}

variable "image_name" {
  type    = string
  default = "gpunode-gpu-node"
}

variable "ssh_username" {
  type    = string
  default = "root"
}

variable "ssh_private_key_file" {
  type    = string
  default = ""
}

variable "ssh_keypair_name" {
  type    = string
  default = ""
}

variable "vpc_id" {
  type        = string
  default     = ""
  description = "Your VPC, always with vswitch_id (gpunode refuses either one alone: see gpunode/clouds/alicloud.py)."
}

variable "vswitch_id" {
  type        = string
  default     = ""
  description = "A vSwitch of vpc_id (both empty: Packer creates a VPC and vSwitch for the build)."
}

variable "user_data" {
  type        = string
  default     = ""
  description = "Run by cloud-init at first boot of the build instance (the toolkit's: lets the build key in)."
}

variable "system_disk_gb" {
  type    = number
  default = 64
}

variable "tags" {
  type    = map(string)
  default = {}
}

source "alicloud-ecs" "gpu-node" {
  region            = var.region
  instance_type     = var.instance_type
  source_image      = var.source_image
  image_name        = var.image_name
  image_description = "GPU node image baked by gpunode"
  tags              = var.tags
  #gpunode-1.7+ run_tags = var.tags
  #gpunode-1.7+ image_family = var.image_family
  vpc_id               = var.vpc_id
  vswitch_id           = var.vswitch_id
  user_data            = var.user_data
  internet_charge_type = "PayByTraffic"

  internet_max_bandwidth_out  = 100
  associate_public_ip_address = true

  system_disk_mapping {
    disk_category = "cloud_essd"
    disk_size     = var.system_disk_gb
  }

  communicator         = "ssh"
  ssh_username         = var.ssh_username
  ssh_private_key_file = var.ssh_private_key_file
  ssh_keypair_name     = var.ssh_keypair_name
  ssh_timeout          = "15m"
}
