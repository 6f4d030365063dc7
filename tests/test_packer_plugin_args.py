"""The templates use only arguments their builders define: Packer 1.6.6's built-in builders and the plugin
releases gpunode pins for Packer 1.7+ (modern Packer cannot run here; their argument lists were read from the
builders' source into tests/data/packer_builder_args.json, which cites file, tag and commit for each).

Also what the toolkit hands the alicloud and tencent templates: a key that reaches the instance (user data) and an
image name the cloud accepts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpunode import clouds
from gpunode.image import packer as packer_cli
from tests.conftest import run_cli
from tests.image_support import require_packer

DATA = json.loads((Path(__file__).parent / "data" / "packer_builder_args.json").read_text())


def source_arguments(template: str) -> dict[str, set[str]]:
    """The arguments of the template's source block: {"": top-level names, "<block>": that block's names}.

    Nested blocks (plain or `dynamic "x" { content { ... } }`) count as names of their parent; map values spread
    over lines (`filters = { ... }`) and a dynamic block's own for_each are not arguments.
    """
    body = template[template.index("\nsource ") + 1:].splitlines()[1:]
    found: dict[str, set[str]] = {"": set()}
    stack: list[str | None] = [""]  # whose arguments the lines at this depth are (None: not arguments)
    for raw in body:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        owner = stack[-1]
        dynamic = re.match(r'^dynamic\s+"(\w+)"\s*\{$', line)
        block = re.match(r"^(\w+)\s*\{$", line)
        if dynamic:
            found[""].add(dynamic.group(1))
            found.setdefault(dynamic.group(1), set())
            stack.append(f"dynamic:{dynamic.group(1)}")
            continue
        if block and owner is not None:
            if owner.startswith("dynamic:") and block.group(1) == "content":
                stack.append(owner.split(":", 1)[1])
                continue
            found[owner].add(block.group(1))
            found.setdefault(block.group(1), set())
            stack.append(block.group(1))
            continue
        attribute = re.match(r"^(\w+)\s*=", line)
        if attribute and owner is not None and not owner.startswith("dynamic:"):
            found[owner].add(attribute.group(1))
        depth = line.count("{") - line.count("}")
        for _ in range(depth):
            stack.append(None)
        for _ in range(-depth):
            stack.pop()
        if not stack:
            break
    return found


def unknown_arguments(used: dict[str, set[str]], accepted: dict) -> list[str]:
    """Arguments (block.argument for nested ones) the builder does not define."""
    wrong = sorted(used[""] - set(accepted["args"]))
    for block, names in used.items():
        if block:
            known = set(accepted["blocks"].get(block, [])) or set()
            wrong += [f"{block}.{n}" for n in sorted(names - known)]
    return wrong


@pytest.mark.parametrize("builder", clouds.names())
def test_each_template_uses_only_arguments_its_builders_define(builder: str) -> None:
    assert builder in DATA, (f"add {builder!r} to tests/data/packer_builder_args.json: {{\"packer-1.6.6\": {{\"args\": "
                             "[...], \"blocks\": {...}, \"source\": \"...\"}, \"plugin vX.Y.Z\": {...}} read from the "
                             "builders' *.hcl2spec.go (docs/writing-clouds.md)")
    releases = DATA[builder]
    for release, accepted in releases.items():
        modern = release.startswith("plugin")
        used = source_arguments(packer_cli.template_text(clouds.cloud(builder), modern))
        assert len(used[""]) > 10, used
        assert unknown_arguments(used, accepted) == [], f"{builder} on {release} ({accepted['source']})"


def test_the_pinned_ranges_are_the_checked_releases() -> None:
    for builder, cloud in clouds.all_clouds().items():
        assert builder in DATA, f"add {builder!r} to tests/data/packer_builder_args.json (docs/writing-clouds.md)"
        constraint = cloud.plugin.version
        low, high = re.fullmatch(r">= (\d+\.\d+\.\d+), < (\d+\.\d+\.\d+)", constraint).groups()
        checked = [tuple(map(int, r.split()[1][1:].split("."))) for r in DATA[builder] if r.startswith("plugin")]
        as_tuple = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
        assert min(checked) == as_tuple(low), builder  # the first release of the range was read
        assert all(c < as_tuple(high) for c in checked), builder


def test_a_renamed_argument_fails_the_check() -> None:
    text = packer_cli.template_text(clouds.cloud("aws"), True).replace("ssh_keypair_name ", "ssh_key_pair_name ")
    assert unknown_arguments(source_arguments(text), DATA["aws"]["plugin v1.8.2"]) == ["ssh_key_pair_name"]
    text = packer_cli.template_text(clouds.cloud("aws"), True).replace("volume_type ", "volumetype ")
    assert unknown_arguments(source_arguments(text), DATA["aws"]["plugin v1.8.2"]) == \
        ["launch_block_device_mappings.volumetype"]


def test_tencent_image_tags_only_where_the_builder_has_them() -> None:
    old, new = (source_arguments(packer_cli.template_text(clouds.cloud("tencent"), m))[""] for m in (False, True))
    assert "image_tags" in new and "image_tags" not in old
    assert "image_tags" not in DATA["tencent"]["packer-1.6.6"]["args"]  # why 1.6.6 does not get it
    assert {"user_data", "internet_charge_type", "zone"} <= old & new


def test_the_aws_template_leaves_the_public_ip_unset_without_a_subnet() -> None:
    text = packer_cli.template_text(clouds.cloud("aws"), True)
    assert 'associate_public_ip_address = var.subnet_id == "" ? null :' in text


@pytest.mark.parametrize(("builder", "base", "extra"), [
    ("alicloud", "alinux-3", ("--packer-var", "vpc_id=vpc-1", "--packer-var", "vswitch_id=vsw-1")),
    ("alicloud", "ubuntu-22.04", ()),
    ("tencent", "tencentos-3", ("--region", "ap-shanghai", "--packer-var", "zone=ap-shanghai-2")),
    ("tencent", "ubuntu-22.04", ()),
])
def test_the_staged_variables_carry_a_key_that_reaches_the_instance_and_a_valid_name(builder, base, extra,
                                                                                      tmp_path: Path) -> None:
    require_packer()
    env = {"GPUNODE_BUILDS": str(tmp_path / "builds"), "ALICLOUD_ACCESS_KEY": "dummy", "ALICLOUD_SECRET_KEY": "dummy",
           "TENCENTCLOUD_SECRET_ID": "dummy", "TENCENTCLOUD_SECRET_KEY": "dummy"}
    result = run_cli("build-image", "--builder", builder, "--base", base, "--source-image", "img-12345678",
                     "--playbook", "playbooks/base.yml", "--validate-only", *extra, env=env)
    assert result.code == 0, result.output
    assert not list((tmp_path / "builds").rglob("*"))  # --validate-only keeps no folder: look at one made here
    from gpunode.image.build import BuildRequest, _prepare, _template_vars

    pairs = dict(zip(extra[::2], extra[1::2], strict=True))
    build = _prepare(BuildRequest(builder=builder, base=base, source_image="img-12345678",
                                  playbook="playbooks/base.yml", region=pairs.get("--region"),
                                  packer_vars=[v for k, v in zip(extra[::2], extra[1::2], strict=True)
                                               if k == "--packer-var"], build_root=str(tmp_path / "builds")),
                     clouds.cloud(builder))
    build_dir = build.directory
    staged = packer_cli.write_var_file(_template_vars(build), build_dir / "vars.pkrvars.hcl").read_text()
    name = re.search(r'^image_name = "(.*)"$', staged, re.M).group(1)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]+", name) and len(name) <= (60 if builder == "tencent" else 128)
    assert name.endswith(build_dir.name)  # unique per build (Tencent refuses a repeated name)
    key = re.search(r'^ssh_private_key_file = "(.*)"$', staged, re.M).group(1)
    public = Path(key + ".pub").read_text().split()[1]
    assert public in staged.partition("user_data = ")[2]  # user data lets this very key in
    assert json.loads((build_dir / "build.json").read_text())["key_file"] == key


def test_long_default_names_keep_the_build_id_and_given_names_are_checked() -> None:
    name = clouds.cloud("tencent").image_name(
        "gpunode-a-very-long-playbook-name-here-ubuntu-22.04-20261123-151500-abcdef", "20261123-151500-abcdef", False)
    assert len(name) <= 60 and name.endswith("-20261123-151500-abcdef") and "." not in name
    assert clouds.cloud("alicloud").image_name("my_image-1", "x", True) == "my_image-1"


@pytest.mark.parametrize(("args", "message"), [
    (("--builder", "alicloud", "--packer-var", "vswitch_id=vsw-1"), "vswitch_id without vpc_id"),
    (("--builder", "tencent", "--region", "ap-shanghai"), "add --packer-var zone=ap-shanghai-N"),
    (("--builder", "tencent", "--packer-var", "zone=ap-beijing-3"), "zone ap-beijing-3 is not in region"),
    (("--builder", "tencent", "--name", "gpu.node 22.04"), "is not accepted by the cloud"),
    (("--builder", "alicloud", "--base", "tencentos-3"), "base 'tencentos-3' is not available for alicloud"),
])
def test_plugin_pitfalls_are_refused_with_exit_2(args, message, tmp_path: Path) -> None:
    require_packer()
    result = run_cli("build-image", "--source-image", "img-12345678", "--playbook", "playbooks/base.yml",
                     "--validate-only", *args, env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2, result.output
    assert message in result.output
