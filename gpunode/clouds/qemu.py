"""qemu: a local qcow2 disk image (on-premises hosts, other clouds' image imports, the lab's own tests)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode.clouds.base import Cloud, Plugin
from gpunode.distros import QEMU_EXAMPLE_IMAGE
from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.image.build import BuildRequest, _Build
    from gpunode.image.packer import PackerRun

_EXAMPLE = f"a qcow2 path or URL, e.g. {QEMU_EXAMPLE_IMAGE}"


class Qemu(Cloud):
    name = "qemu"
    template = "qemu.pkr.hcl"
    plugin = Plugin("qemu", "github.com/hashicorp/qemu", ">= 1.1.0, < 1.2.0")
    summary = "a local qcow2 disk image (no cloud account)"
    credentials_help = "no credentials"
    power_off = True  # no API stops the VM: gpunode powers it off at the end (the template says why)

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        self.base(request.base)
        if not request.source_image:
            raise UsageError("qemu builds need the base image", fix=f"add --source-image ({_EXAMPLE})")
        if "://" not in request.source_image:
            local = Path(request.source_image).expanduser().resolve()  # Packer runs in the build folder
            if not local.is_file():
                raise UsageError(f"the base image {request.source_image} does not exist",
                                 fix="give the path of a qcow2 file (or an http(s) URL) with --source-image")
            request.source_image = str(local)

    def template_vars(self, build: _Build) -> dict[str, Any]:
        return {"source_image": build.request.source_image, "image_name": build.name,
                "output_dir": str(build.directory / "output"), "ssh_username": self.base(build.request.base).user,
                "ssh_private_key_file": build.key_file, "seed_dir": str(nocloud_seed(build)),
                "accelerator": accelerator()}

    def artifact(self, build: _Build, run: PackerRun) -> str:
        """The disk file (the artifact's "id" is just "VM")."""
        disks = [f for f in run.artifacts.files() if f.endswith(".qcow2")]
        if disks:
            return str(Path(build.directory / "packer", disks[0]).resolve())
        return super().artifact(build, run)

    def tag_image(self, build: _Build, result: Any) -> str:
        return "a qcow2 file has no tags"


def accelerator() -> str:
    """kvm when /dev/kvm is usable here, else tcg (software emulation)."""
    return "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"


def nocloud_seed(build: _Build) -> Path:
    """A cloud-init NoCloud seed that lets the build key in (qemu builds of cloud images)."""
    seed = build.directory / "seed"
    seed.mkdir(exist_ok=True)
    (seed / "user-data").write_text("#cloud-config\nssh_pwauth: false\nssh_authorized_keys:\n"
                                    f"  - {build.public_key}\n")
    (seed / "meta-data").write_text(f"instance-id: {build.keypair_name}\nlocal-hostname: gpunode-build\n")
    return seed


CLOUD = Qemu()
