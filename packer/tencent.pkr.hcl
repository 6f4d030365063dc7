# A Tencent Cloud GPU node image (tencentcloud-cvm), provisioned by gpunode itself: the same playbook
# `gpunode provision` runs, then image_cleanup and image_validate (and verify-gpu on a GPU build instance).
#
# Run it through the toolkit: `gpunode build-image --builder tencent --source-image img-...`.
# Credentials: TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY; nothing secret is written here.
# The build key is gpunode's own, let in by user_data: with a temporary key pair the plugin detaches it after
# provisioning with a forced stop and restart (step_detach_temp_key_pair.go), which would undo image cleanup.
# Lines starting with "#gpunode-1.7+ " are arguments of the tencentcloud plugin that Packer 1.6.6's built-in
# builder lacks; the toolkit uncomments them when it stages the template for Packer 1.7+. On Packer 1.6 the toolkit
# tags the image itself after the build (Tag API ModifyResourceTags: gpunode/image/tencent.py).

variable "region" {
  type    = string
  default = "ap-guangzhou"
}

variable "zone" {
  type    = string
  default = "ap-guangzhou-6"
}

variable "instance_type" {
  type    = string
  default = "GN7.2XLARGE32" # 1x T4
}

variable "source_image" {
  type        = string
  default     = ""
  description = "The base image id (img-xxxxxxxx), e.g. a public Ubuntu 22.04 image of the region."
}

variable "source_image_name" {
  type        = string
  default     = ""
  description = "Without source_image: a regular expression for the base image's name (--base NAME)."
}

variable "image_name" {
  type    = string
  default = "gpunode-gpu-node"
}

variable "ssh_username" {
  type        = string
  description = "The base image's login (from the distro adapter of --base)."
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
  type    = string
  default = ""
}

variable "subnet_id" {
  type    = string
  default = ""
}

variable "user_data" {
  type        = string
  default     = ""
  description = "Run by cloud-init at first boot of the build instance (the toolkit's: lets the build key in)."
}

variable "disk_size_gb" {
  type    = number
  default = 64
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags for the build instance and (Packer 1.7+, plugin >= 1.1.0) the image."
}

source "tencentcloud-cvm" "gpu-node" {
  region            = var.region
  zone              = var.zone
  instance_type     = var.instance_type
  source_image_id   = var.source_image
  source_image_name = var.source_image_name
  image_name        = var.image_name
  image_description = "GPU node image baked by gpunode"
  disk_type         = "CLOUD_PREMIUM"
  disk_size         = var.disk_size_gb
  vpc_id            = var.vpc_id
  subnet_id         = var.subnet_id
  run_tags          = var.tags
  user_data         = var.user_data
  #gpunode-1.7+ image_tags = var.tags
  # CreateImage from a stopped instance: the default (false) images it running, which may miss unwritten data
  force_poweroff = true

  associate_public_ip_address = true
  internet_charge_type        = "TRAFFIC_POSTPAID_BY_HOUR"
  internet_max_bandwidth_out  = 100

  communicator         = "ssh"
  ssh_username         = var.ssh_username
  ssh_private_key_file = var.ssh_private_key_file
  ssh_keypair_name     = var.ssh_keypair_name
  ssh_timeout          = "15m"
}
