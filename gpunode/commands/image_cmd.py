"""`build-ami`, `build-image`, `bake` and `image-provision` (what Packer runs): images of provisioned GPU nodes."""

from __future__ import annotations

from gpunode.clouds import cloud
from gpunode.commands.common import EXIT_OK
from gpunode.image.bake import BakeRequest, bake
from gpunode.image.build import BuildRequest, BuildResult, build_image
from gpunode.image.provision import image_provision as run_image_provision


def build(request: BuildRequest) -> int:
    """Run a build; print the image id, its tags and the outputs. Errors raise (cli_errors turns them into 1/2)."""
    plugin = cloud(request.builder)
    request.region = request.region or plugin.default_region()
    result = build_image(request, plugin, out=_out)
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
