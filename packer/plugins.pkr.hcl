# Packer 1.7+ only (Debian's packer 1.6.6 has these builders built in and rejects this block): the plugins the
# templates need. Install them once, with network access:  packer init packer/plugins.pkr.hcl
# The toolkit (gpunode build-ami / build-image) stages only the one plugin a build needs next to its template and
# runs `packer init` itself on modern Packer; it never stages this file for Packer 1.6.
# Version ranges: the releases whose argument lists tests/data/packer_builder_args.json holds (checked by
# tests/test_packer_templates.py); widen them only together with that file. alicloud stops below 1.1.3, whose
# RunInstances gives the build instance a public IP that the template's EIP would then be added to.
packer {
  required_version = ">= 1.7.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.8.0, < 1.9.0"
    }
    alicloud = {
      source  = "github.com/hashicorp/alicloud"
      version = ">= 1.1.0, < 1.1.3"
    }
    tencentcloud = {
      source  = "github.com/hashicorp/tencentcloud"
      version = ">= 1.2.0, < 1.3.0"
    }
    qemu = {
      source  = "github.com/hashicorp/qemu"
      version = ">= 1.1.0, < 1.2.0"
    }
  }
}
