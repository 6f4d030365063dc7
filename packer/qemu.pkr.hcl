# A local GPU node disk image (qemu, qcow2), provisioned by gpunode itself: the same playbook `gpunode provision`
# runs, then image_cleanup and image_validate. For on-premises hosts, other clouds' image imports, and tests.
#
# Run it through the toolkit: `gpunode build-image --builder qemu --source-image BASE.qcow2`
# writes <build_dir>/build.json and a cloud-init NoCloud seed (<build_dir>/seed) that authorizes the build's key.
# A base without cloud-init boots with `qemuargs` instead (e.g. a direct kernel boot: -kernel/-initrd/-append).
# No credentials. Reboots during provisioning work: gpunode reconnects, and at the end gpunode powers the VM off
# itself (Packer's shutdown command would need a new login after a reboot, once image_cleanup removed the build key).

variable "source_image" {
  type        = string
  description = "The base disk: a qcow2 path or URL (a cloud image with cloud-init, or your own)."
}

variable "source_checksum" {
  type    = string
  default = "none"
}

variable "image_name" {
  type    = string
  default = "gpunode-gpu-node"
}

variable "output_dir" {
  type    = string
  default = "output-qemu"
}

variable "disk_size" {
  type    = string
  default = "20G"
}

variable "memory_mb" {
  type    = number
  default = 2048
}

variable "cpus" {
  type    = number
  default = 2
}

variable "accelerator" {
  type        = string
  default     = "kvm"
  description = "kvm, or tcg where /dev/kvm is missing or unusable (slow)."
}

variable "ssh_username" {
  type        = string
  description = "The base image's login (from the distro adapter of --base)."
}

variable "ssh_private_key_file" {
  type = string
}

variable "seed_dir" {
  type        = string
  default     = ""
  description = "Served over HTTP to cloud-init (NoCloud): user-data, meta-data. The toolkit writes it."
}

variable "qemuargs" {
  type        = list(list(string))
  default     = []
  description = "Extra qemu arguments; when empty, the SMBIOS serial that points cloud-init at the seed."
}

source "qemu" "gpu-node" {
  iso_url          = var.source_image
  iso_checksum     = var.source_checksum
  disk_image       = true
  use_backing_file = false
  format           = "qcow2"
  disk_size        = var.disk_size
  disk_interface   = "virtio"
  net_device       = "virtio-net"
  accelerator      = var.accelerator
  memory           = var.memory_mb
  cpus             = var.cpus
  headless         = true
  vm_name          = "${var.image_name}.qcow2"
  output_directory = var.output_dir
  http_directory   = var.seed_dir
  # The serial console goes to <build_dir>/console.log (boot loader, kernel, cloud-init: what to read when SSH never comes).
  qemuargs = concat([["-serial", "file:${var.build_dir}/console.log"]], length(var.qemuargs) > 0 ? var.qemuargs : [
    ["-smbios", "type=1,serial=ds=nocloud-net;s=http://{{ .HTTPIP }}:{{ .HTTPPort }}/"]
  ])

  communicator         = "ssh"
  ssh_username         = var.ssh_username
  ssh_private_key_file = var.ssh_private_key_file
  ssh_timeout          = "20m"
  # No shutdown_command: gpunode has powered the VM off (see the top); Packer only stops a VM still running.
}
