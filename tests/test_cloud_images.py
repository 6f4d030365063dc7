"""Alibaba Cloud and Tencent Cloud builds as their plugins and APIs expect (issue 26), checked offline.

Every expectation cites the vendor's own file or page through gpunode/image/cloud_facts.py (ALICLOUD, TENCENTCLOUD):
- alicloud: hashicorp/packer-plugin-alicloud at 629db51 (v1.1.2) and c9d1e19 (main, 1.1.3-dev); Alibaba's API FAQ;
- tencentcloud: hashicorp/packer-plugin-tencentcloud at 8e908fa (v1.2.0) and 63c1171 (the builder in Packer 1.6.6);
  Tencent's CreateImage page; Tencent's own Terraform provider (tencentcloudstack/terraform-provider-tencentcloud).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpunode.clouds import cloud
from gpunode.clouds.tencent import image_name_pattern as tencent_image_name
from gpunode.clouds.tencent import public_base
from gpunode.image import build as build_mod
from gpunode.image import packer as packer_cli
from gpunode.image import tencent
from gpunode.image.cloud_facts import ALICLOUD, TENCENTCLOUD
from gpunode.image.machine import Artifacts
from gpunode.image.report import BuildReport
from gpunode.vendor_facts import value
from tests.conftest import run_cli
from tests.image_support import require_packer
from tests.test_packer_plugin_args import DATA, source_arguments

DUMMY_CREDENTIALS = {"ALICLOUD_ACCESS_KEY": "dummy", "ALICLOUD_SECRET_KEY": "dummy",
                     "TENCENTCLOUD_SECRET_ID": "dummy", "TENCENTCLOUD_SECRET_KEY": "dummy"}


def validate_only(tmp_path: Path, *args: str):
    return run_cli("build-image", "--playbook", "playbooks/base.yml", "--validate-only", *args,
                   env={"GPUNODE_BUILDS": str(tmp_path / "builds"), **DUMMY_CREDENTIALS})


# -- Alibaba Cloud ---------------------------------------------------------------------------------------------------

def test_alicloud_vpc_without_vswitch_is_refused_before_building(tmp_path: Path) -> None:
    """step_config_vswitch.go (629db51:116-125) creates a vSwitch in the given VPC when vswitch_id is empty, at
    172.16.0.0/24 (client.go:113) unless vpc_cidr_block says otherwise: outside the VPC's CIDR that fails mid-build."""
    require_packer()
    assert value(ALICLOUD, "vswitch_default_cidr") == "172.16.0.0/24"
    result = validate_only(tmp_path, "--builder", "alicloud", "--source-image", "aliyun_3_x64_20G_alibase_x.vhd",
                           "--packer-var", "vpc_id=vpc-1")
    assert result.code == 2, result.output
    assert "vpc_id without vswitch_id" in result.output and "172.16.0.0/24" in result.output
    assert "--packer-var vswitch_id=vsw-" in result.output
    assert not (tmp_path / "builds").exists()  # refused before a build folder or key exists
    both = validate_only(tmp_path, "--builder", "alicloud", "--source-image", "aliyun_3_x64_20G_alibase_x.vhd",
                         "--packer-var", "vpc_id=vpc-1", "--packer-var", "vswitch_id=vsw-1")
    assert both.code == 0, both.output


def test_alicloud_build_instance_gets_run_tags_where_the_builder_has_them() -> None:
    """run_config.go (629db51:58-60) `run_tags` tags the instance launched for the image; Packer 1.6.6's built-in
    builder has no such argument (tests/data/packer_builder_args.json), so it is a plugin-only line."""
    assert value(ALICLOUD, "run_tags") == "run_tags"
    old, new = (source_arguments(packer_cli.template_text(cloud("alicloud"), m))[""] for m in (False, True))
    assert "run_tags" in new and "run_tags" not in old
    assert "run_tags" not in DATA["alicloud"]["packer-1.6.6"]["args"]
    assert all("run_tags" in DATA["alicloud"][r]["args"] for r in DATA["alicloud"] if r.startswith("plugin"))
    assert re.search(r"^\s*run_tags\s*=\s*var\.tags$", packer_cli.template_text(cloud("alicloud"), True), re.M)


def test_alicloud_plugin_range_stops_below_the_runinstances_switch() -> None:
    """From 1.1.3 (version.go c9d1e19:10-15) the plugin creates the instance with RunInstances
    (step_create_instance.go c9d1e19:58-60), which gives it a public IP when InternetMaxBandwidthOut > 0 (Alibaba's API
    FAQ), and associate_public_ip_address then allocates and associates an EIP as well (step_config_eip.go
    c9d1e19:64-72). The template sets both, so the pinned range must end before that version."""
    text = packer_cli.template_text(cloud("alicloud"), True)
    assert "associate_public_ip_address = true" in text and "internet_max_bandwidth_out  = 100" in text
    constraint = cloud("alicloud").plugin.version
    high = re.fullmatch(r">= [\d.]+, < ([\d.]+)", constraint).group(1)
    as_tuple = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    assert as_tuple(high) <= as_tuple(value(ALICLOUD, "run_instances_since")), constraint
    assert f'version = "{constraint}"' in packer_cli.plugins_hcl(cloud("alicloud"))  # what a 1.7+ build stages


# -- Tencent Cloud ---------------------------------------------------------------------------------------------------

def test_tencent_image_is_made_from_a_powered_off_instance() -> None:
    """CreateImage's ForcePoweroff defaults to false, imaging the running instance, which may miss data (Tencent's
    CreateImage page); `force_poweroff` sends it (step_create_image.go 8e908fa:41-47; 63c1171:40-44 in Packer
    1.6.6's built-in builder), so it is set on both."""
    for modern in (False, True):
        assert re.search(r"^\s*force_poweroff\s*=\s*true$", packer_cli.template_text(cloud("tencent"), modern), re.M)
    assert all("force_poweroff" in DATA["tencent"][r]["args"] for r in DATA["tencent"])


def test_tencent_tags_are_modify_resource_tags_requests_on_the_images_resource_name() -> None:
    """Tencent's Terraform provider tags cvm images with ModifyResourceTags on qcs::cvm:<region>:uin/:image/<id>
    (common.go f6970a9:424-430, service_tencentcloud_tag.go f6970a9:31-59); the SDK's request model takes at most 10
    ReplaceTags, so 14 tags are two requests. The requests are the SDK's own models, serialised as they are sent."""
    tags = {f"gpunode:k{i}": f"v{i}" for i in range(14)}
    made = tencent.requests("ap-guangzhou", "img-abc123", tags)
    assert len(made) == 2
    sent = [json.loads(r.to_json_string()) for r in made]
    assert {s["Resource"] for s in sent} == {"qcs::cvm:ap-guangzhou:uin/:image/img-abc123"}
    assert [len(s["ReplaceTags"]) for s in sent] == [10, 4]
    assert {t["TagKey"]: t["TagValue"] for s in sent for t in s["ReplaceTags"]} == tags
    assert tencent.artifact_image("ap-guangzhou:img-abc123", "") == ("ap-guangzhou", "img-abc123")
    # Tag "Use Limits": values 1-255 characters of letters, digits, inner spaces and + - = . _ : / @ ( ) [ ] , ; > <
    (odd,) = [json.loads(r.to_json_string()) for r in tencent.requests(
        "ap-guangzhou", "img-1", {"gpunode:kernel": "", "gpunode:verify": " ok: 1 GPU, 0 findings #1 ", "x": "é'\"" })]
    assert [t["TagValue"] for t in odd["ReplaceTags"]] == ["none", "ok: 1 GPU, 0 findings _1", "é__"]


class _FakeTagApi:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def ModifyResourceTags(self, request) -> None:  # noqa: N802
        self.sent.append(json.loads(request.to_json_string()))


def test_a_tencent_build_on_packer_16_tags_its_image_after_packer(monkeypatch, tmp_path: Path) -> None:
    """Packer 1.6.6's builder has no image_tags (packer_builder_args.json), and 1.7+'s carries only what is known
    before provisioning: gpunode puts every tag (static and versions) on the image after the build."""
    require_packer()
    assert "image_tags" not in DATA["tencent"]["packer-1.6.6"]["args"]
    api = _FakeTagApi()

    def fake_build(packer, staged, var_file, on_line, env=None):  # what Packer leaves after a good build
        build_dir = Path(staged).parent
        BuildReport(host="h", ok=True, image={"driver": "550.163.01", "kernel_boot": "6.1.0-1"}).write(
            build_dir / "report.json")
        run = packer_cli.PackerRun(exit_code=0, artifacts=Artifacts())
        run.artifacts.builds["tencentcloud-cvm.gpu-node"] = {"0": {"id": "ap-guangzhou:img-made1"}}
        return run

    monkeypatch.setattr(packer_cli, "build", fake_build)
    monkeypatch.setattr(tencent, "client", lambda region: api)
    from gpunode.image import tencent_images  # the base's id: found by gpunode before Packer (no API here)

    monkeypatch.setattr(tencent_images, "caller", lambda region: _pages(
        [{"ImageId": "img-abcd1234", "OsName": "TencentOS Server 4 for x86_64", "CreatedTime": "2025"}])[0])
    for key, val in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(key, val)
    request = build_mod.BuildRequest(builder="tencent", playbook="playbooks/base.yml", base="tencentos-4",
                                     build_root=str(tmp_path / "builds"))
    result = build_mod.build_image(request, cloud(request.builder), out=lambda line: None)
    assert (result.image_id, result.region) == ("img-made1", "ap-guangzhou")
    put = {t["TagKey"]: t["TagValue"] for s in api.sent for t in s["ReplaceTags"]}
    assert put["gpunode:driver"] == "550.163.01" and put["gpunode:base"] == "tencentos-4" and "Name" in put
    assert {s["Resource"] for s in api.sent} == {"qcs::cvm:ap-guangzhou:uin/:image/img-made1"}
    record = json.loads((result.build_dir / "image.json").read_text())
    assert record["image_id"] == "img-made1" and record["tags"] == put


def test_a_tencent_build_without_the_tag_sdk_is_refused_before_anything_is_made(monkeypatch, tmp_path: Path) -> None:
    def missing() -> None:
        raise tencent.UsageError("no SDK", fix="pip install 'gpunode[tencent]'")

    monkeypatch.setattr(tencent, "require_sdk", missing)
    request = build_mod.BuildRequest(builder="tencent", playbook="playbooks/base.yml", base="tencentos-3",
                                     build_root=str(tmp_path / "builds"))
    with pytest.raises(tencent.UsageError, match="no SDK"):
        build_mod.build_image(request, cloud(request.builder), out=lambda line: None)
    assert not (tmp_path / "builds").exists()


def _validated_vars(monkeypatch, request) -> str:
    """The variables file that `packer validate` really checked (the folder is gone after --validate-only)."""
    seen: list[str] = []
    real = packer_cli.validate

    def keep(packer, directory: Path, var_file: Path, *rest) -> str:
        seen.append(var_file.read_text())
        return real(packer, directory, var_file, *rest)

    monkeypatch.setattr(packer_cli, "validate", keep)
    build_mod.build_image(request, cloud(request.builder), out=lambda line: None)
    return seen[0]


# -- Base lookups ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("base", "os_name"), [("tencentos-3", "TencentOS Server 3.2 (Final)"),
                                               ("tencentos-4", "TencentOS Server 4 for x86_64")])
def test_tencentos_bases_are_found_by_name_without_source_image(base: str, os_name: str, monkeypatch,
                                                                tmp_path: Path) -> None:
    """source_image_name is a regular expression over image names (run_config.go 8e908fa:36,
    step_check_source_image.go 8e908fa:29-58); Tencent's provider finds TencentOS public images by names starting
    "TencentOS" and names the OSes as below (data_source_tc_images.md f6970a9:23,31; resource_tc_as_scaling_config.md
    f6970a9:12)."""
    require_packer()
    pattern = tencent_image_name(base)
    assert re.match(pattern, os_name) and not re.match(pattern, "Ubuntu Server 22.04 LTS 64bit")
    assert value(TENCENTCLOUD, "public_image_name_prefix") == "TencentOS"
    result = validate_only(tmp_path, "--builder", "tencent", "--base", base)
    assert result.code == 0, result.output
    assert not list((tmp_path / "builds").glob("*"))  # --validate-only keeps no folder (and no key)
    staged = _validated_vars(monkeypatch, build_mod.BuildRequest(
        builder="tencent", playbook="playbooks/base.yml", base=base, validate_only=True,
        build_root=str(tmp_path / "again")))
    assert f"source_image_name = {json.dumps(pattern)}" in staged and 'source_image = ""' in staged
    assert 'ssh_username = "root"' in staged


def test_an_ubuntu_base_on_tencent_still_needs_the_image_id(tmp_path: Path) -> None:
    require_packer()
    result = validate_only(tmp_path, "--builder", "tencent", "--base", "ubuntu-22.04")
    assert result.code == 2 and "add --source-image (img-xxxxxxxx)" in result.output


def test_alicloud_public_bases_need_their_id_image_families_are_for_custom_images(monkeypatch, tmp_path: Path) -> None:
    """The plugin's image_family picks 'the latest available custom image' of a family (run_config.go 697283d:36-37):
    a public base (alinux-3) is refused without --source-image on every Packer, and the fix is the DescribeImages
    call that finds it (ImageOwnerAlias system, ImageFamily: the API's documented parameters)."""
    require_packer()
    refused = validate_only(tmp_path, "--builder", "alicloud", "--base", "alinux-3")  # before Packer is asked
    assert refused.code == 2, refused.output
    said = " ".join(refused.output.split())
    assert "image_family picks the newest custom image" in said
    assert ("aliyun ecs DescribeImages --RegionId <region> --ImageOwnerAlias system --ImageFamily "
            "acs:alibaba_cloud_linux_3_2104_lts_x64") in said
    assert not (tmp_path / "builds").exists()
    real = packer_cli.find_packer()
    monkeypatch.setattr(packer_cli, "find_packer", lambda binary=None: packer_cli.Packer(real.path, (1, 11, 2)))
    monkeypatch.setattr(packer_cli, "ensure_plugins", lambda *a, **k: None)  # no plugin can be installed here
    seen: dict[str, str] = {}

    def read_staged(packer, directory: Path, var_file: Path, *rest) -> str:  # no plugin here: 1.6.6 cannot validate
        seen["vars"] = var_file.read_text()
        return ""

    monkeypatch.setattr(packer_cli, "validate", read_staged)
    request = build_mod.BuildRequest(builder="alicloud", playbook="playbooks/base.yml", base="alinux-3",
                                     source_image="aliyun_3_x64_20G_alibase_20250101.vhd", validate_only=True,
                                     build_root=str(tmp_path / "modern"))
    build_mod.build_image(request, cloud(request.builder), out=lambda line: None)
    assert 'source_image = "aliyun_3_x64_20G_alibase_20250101.vhd"' in seen["vars"]
    assert "image_family" not in seen["vars"]


# -- TencentOS: gpunode's own lookup, every page ---------------------------------------------------------------------

def _pages(images: list[dict], size: int = 20):
    """A stand-in for DescribeImages that serves `images` the API's way (Offset, TotalCount, 20 a page) and
    records each request."""
    asked: list[dict] = []

    def call(action: str, params: dict) -> dict:
        asked.append({"action": action, **params})
        offset = params.get("Offset", 0)
        return {"TotalCount": len(images), "ImageSet": images[offset:offset + size]}
    return call, asked


def test_the_tencentos_base_is_found_on_any_page_by_its_os_name() -> None:
    from gpunode.image.tencent_images import find_public_image

    other = [{"ImageId": f"img-other{i:03d}", "OsName": "TencentOS Server 2.4 (Final)",
              "CreatedTime": "2024-01-01 00:00:00"} for i in range(45)]
    wanted = [{"ImageId": "img-ts3old", "OsName": "TencentOS Server 3.1 (TK4)", "CreatedTime": "2023-05-01 00:00:00"},
              {"ImageId": "img-ts31x", "OsName": "TencentOS Server 31", "CreatedTime": "2026-01-01 00:00:00"},
              {"ImageId": "img-ts3new", "OsName": "TencentOS Server 3.2 (Final)", "CreatedTime": "2025-09-01 12:00:00"}]
    call, asked = _pages(other + wanted)
    assert find_public_image("TencentOS Server 3", call) == ("img-ts3new", "TencentOS Server 3.2 (Final)")
    assert [a["Offset"] for a in asked] == [0, 20, 40]  # the third page held it: the builder reads only the first
    assert asked[0]["action"] == "DescribeImages"
    assert asked[0]["Filters"] == [{"Name": "image-type", "Values": ["PUBLIC_IMAGE"]},
                                   {"Name": "platform", "Values": ["TencentOS"]}]


def test_no_tencentos_image_is_a_usage_error_with_the_fix() -> None:
    from gpunode.errors import UsageError
    from gpunode.image.tencent_images import find_public_image

    call, _ = _pages([{"ImageId": "img-x", "OsName": "TencentOS Server 2.4", "CreatedTime": ""}])
    with pytest.raises(UsageError, match="no public image of TencentOS Server 4") as error:
        find_public_image("TencentOS Server 4", call)
    assert "--source-image img-" in error.value.fix


def test_a_tencent_build_gets_the_id_gpunode_found() -> None:
    call, _ = _pages([{"ImageId": "img-ts4", "OsName": "TencentOS Server 4 for x86_64", "CreatedTime": "2025"}])
    assert public_base("tencentos-4", "ap-guangzhou", call) == {"source_image": "img-ts4",
                                                                             "source_image_name": ""}
