# A Google Cloud GPU node image (googlecompute), provisioned by gpunode itself: the same playbook `gpunode provision`
# runs, then image_cleanup and image_validate (and verify-gpu on the GPU build instance).
#
# Run it through the toolkit: `gpunode build-image --builder gcp --packer-var project_id=PROJECT`.
# Credentials: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default
# login`, or the metadata server on Compute Engine), read only when the build runs; nothing secret is written here.
# GPUs: a G2 machine type carries its NVIDIA L4; on an N1 type give accelerator_count (and accelerator). Either way
# the instance stops for host maintenance (GPU instances cannot live-migrate; the builder refuses MIGRATE with GPUs).
# The build key is gpunode's own, in the instance's ssh-keys metadata (the builder adds none when a key file is
# given); Google's guest agent makes that user, with sudo. The build block is packer/build.pkr.hcl.in, shared.

variable "project_id" {
  type        = string
  description = "Your project: the build instance runs there and the image is kept there."
}

variable "zone" {
  type    = string
  default = "us-central1-a"
}

variable "instance_type" {
  type        = string
  default     = "g2-standard-4"
  description = "The machine type (G2: NVIDIA L4 included; N1: add accelerator_count)."
}

variable "accelerator" {
  type    = string
  default = "nvidia-tesla-t4"
}

variable "accelerator_count" {
  type    = number
  default = 0
}

variable "source_image" {
  type        = string
  default     = ""
  description = "An exact base image; when empty, the newest of source_image_family."
}

variable "source_image_family" {
  type    = string
  default = ""
}

variable "source_image_project_id" {
  type    = list(string)
  default = []
}

variable "image_name" {
  type    = string
  default = "gpunode-gpu-node"
}

variable "ssh_username" {
  type    = string
  default = "gpunode"
}

variable "ssh_private_key_file" {
  type = string
}

variable "ssh_keys" {
  type        = string
  description = "The instance's ssh-keys metadata, USER:PUBLIC_KEY (the toolkit's: lets the build key in)."
}

variable "network" {
  type    = string
  default = ""
}

variable "subnetwork" {
  type    = string
  default = ""
}

variable "disk_size_gb" {
  type    = number
  default = 64
}

variable "disk_type" {
  type        = string
  default     = ""
  description = "Empty: the builder's default (pd-standard); e.g. pd-balanced or pd-ssd."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Labels (lowercase, Compute Engine's rules) for the build instance and the image."
}

source "googlecompute" "gpu-node" {
  project_id              = var.project_id
  zone                    = var.zone
  machine_type            = var.instance_type
  accelerator_type        = var.accelerator_count > 0 ? "projects/${var.project_id}/zones/${var.zone}/acceleratorTypes/${var.accelerator}" : ""
  accelerator_count       = var.accelerator_count
  on_host_maintenance     = "TERMINATE"
  source_image            = var.source_image
  source_image_family     = var.source_image_family
  source_image_project_id = var.source_image_project_id
  image_name              = var.image_name
  image_description       = "GPU node image baked by gpunode"
  image_labels            = var.tags
  labels                  = var.tags
  network                 = var.network
  subnetwork              = var.subnetwork
  disk_size               = var.disk_size_gb
  disk_type               = var.disk_type
  metadata = {
    ssh-keys = var.ssh_keys
  }

  communicator         = "ssh"
  ssh_username         = var.ssh_username
  ssh_private_key_file = var.ssh_private_key_file
  ssh_timeout          = "15m"
}
