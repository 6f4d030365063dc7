"""`build-ami`, `build-image`, `bake` and `image-provision` (what Packer runs): images of provisioned GPU nodes."""

from __future__ import annotations

import os

from gpunode.commands.common import EXIT_OK
from gpunode.image.bake import BakeRequest, bake
from gpunode.image.build import BuildRequest, BuildResult, build_image
from gpunode.image.provision import image_provision as run_image_provision


def _default_region(builder: str) -> str | None:
    if builder == "aws":
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return None  # the template's default (or the vendor's environment variable)


def build(request: BuildRequest) -> int:
    """Run a build; print the image id, its tags and the outputs. Errors raise (cli_errors turns them into 1/2)."""
    request.region = request.region or _default_region(request.builder)
    result = build_image(request, out=_out)
    if request.validate_only:
        print("validated: nothing was built, nothing kept (no build folder, no key)")
        return EXIT_OK
    _summary(result)
    return EXIT_OK


def bake_host(request: BakeRequest) -> int:
    result = bake(request, out=_out)
    _summary(result)
    return EXIT_OK


def image_provision(spec: str, host: str, port: int, user: str) -> int:
    return run_image_provision(spec, host, int(port), user)


def _out(line: str) -> None:
    print(line, flush=True)


def _summary(result: BuildResult) -> None:
    print(f"image: {result.image_id}" + (f" ({result.region})" if result.region else ""))
    for key, value in result.tags.items():
        print(f"  {key} = {value}")
    for path in result.outputs:
        print(f"wrote {path}")
    print(f"build folder: {result.build_dir}")
