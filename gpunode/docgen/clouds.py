"""docs/clouds.md: the image builders, read from their plug-ins (gpunode/clouds/)."""

from __future__ import annotations

from gpunode.docgen.where import GENERATED
from gpunode.markdown import cell, code, table


def clouds_md() -> str:
    from gpunode.clouds import all_clouds

    out = [GENERATED, "", "# Image builders", "",
           "`gpunode build-ami` bakes AWS AMIs; `gpunode build-image --builder NAME` the others. Each builder is one "
           "module of `gpunode/clouds/` and one Packer template of `packer/` (the build block every template shares "
           "is `packer/build.pkr.hcl.in`): [adding a cloud](writing-clouds.md). Debian's Packer 1.6.6 has every "
           "builder built in; on Packer 1.7+ gpunode stages the build's one plugin and runs `packer init`.", ""]
    rows = []
    for cloud in all_clouds().values():
        plugin = f"{code(cloud.plugin.source)} {code(cloud.plugin.version)}" if cloud.plugin else "built in"
        rows.append([code(cloud.name), cell(cloud.summary), code(f"packer/{cloud.template}"), plugin,
                     cell(cloud.credentials_help)])
    out += table(["builder", "image", "template", "Packer 1.7+ plugin", "credentials"], rows)
    for cloud in all_clouds().values():
        out += ["", f"## {cloud.name}", "", cell(cloud.summary), ""]
        out += table(["--base", "login user", "found without --source-image by"],
                     [[code(name), code(base.user) if base.user else "(made by the builder)",
                       cell(cloud.found_by(name) or "(needs --source-image)")]
                      for name, base in cloud.bases.items()])
    return "\n".join(out) + "\n"
