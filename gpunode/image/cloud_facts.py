"""Alibaba Cloud and Tencent Cloud facts the image builds rest on, each with the vendor file or page it was read from.

Values only (names, versions, API and option names); what the source says is in `note`, in our words.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Source, fact_table

_ALI = "hashicorp/packer-plugin-alicloud"
_ALI_112 = "629db51bdd60fde2d82dc1be4dcd5511a57c5ef1"   # v1.1.2, the last release (CreateInstance)
_ALI_110 = "697283d4f1c882cfb7a7ff526dacf34fd6fcc5a8"   # v1.1.0
_ALI_HEAD = "c9d1e19acd39b7076684e7918c98b91ff900ee40"  # main after v1.1.2: 1.1.3-dev, RunInstances
_PUBLIC_IMAGES = "https://help.aliyun.com/zh/ecs/user-guide/public-mirroring-overview"  # public images and families

ALICLOUD = fact_table("alicloud", {
    "vswitch_default_cidr": Fact("172.16.0.0/24", Source(_ALI, "builder/ecs/client.go", _ALI_112, "113"),
                                 note="DefaultCidrBlock: the CIDR of the vSwitch the plugin makes when none is given"),
    "vswitch_created_in_vpc": Fact("CreateVSwitch", Source(_ALI, "builder/ecs/step_config_vswitch.go", _ALI_112,
                                                           "116-125"),
                                   note="with vswitch_id empty the step creates a vSwitch (vpc_cidr_block or the "
                                   "default CIDR) in the VPC of the build, which is vpc_id when given"),
    "vswitch_request_vpc": Fact("VpcId", Source(_ALI, "builder/ecs/step_config_vswitch.go", _ALI_112, "199-206"),
                                note="CreateVSwitch's VpcId is the build's VPC (the user's vpc_id)"),
    "run_tags": Fact("run_tags", Source(_ALI, "builder/ecs/run_config.go", _ALI_112, "58-60"),
                     note="tags of the instance launched to create the image (not in Packer 1.6.6's builder)"),
    "image_family": Fact("image_family", Source(_ALI, "builder/ecs/run_config.go", _ALI_110, "36-38"),
                         note="the plugin's own comment: the family chooses 'the latest available custom image' "
                         "(plugin >= 1.1.0): gpunode does not use it for public bases"),
    "family_alinux_3": Fact("acs:alibaba_cloud_linux_3_2104_lts_x64", Source(url=_PUBLIC_IMAGES),
                            note="image family of Alibaba Cloud Linux 3.2104 LTS 64-bit"),
    "family_ubuntu_22_04": Fact("acs:ubuntu_22_04_x64", Source(url=_PUBLIC_IMAGES),
                                note="image family of Ubuntu 22.04 LTS 64-bit"),
    "family_ubuntu_24_04": Fact("acs:ubuntu_24_04_x64", Source(url=_PUBLIC_IMAGES),
                                note="image family of Ubuntu 24.04 LTS 64-bit (Debian 12's families are per point "
                                "release: none is used)"),
    "family_lookup": Fact("DescribeImageFromFamily", Source(_ALI, "builder/ecs/step_check_image_family.go",
                                                            _ALI_112, "24-35"),
                          note="with image_family the plugin checks the family with DescribeImageFromFamily"),
    "family_lookup_public": Fact("DescribeImageFromFamily", Source(
        url="https://alibabacloud.com/help/tc/ecs/api-describeimagefromfamily"),
        note="returns the latest available image of a family; editions of this page disagree on whether public "
        "families are served (a 2025 Japanese edition: custom images only), and the plugin documents custom images: "
        "gpunode asks for the public base's id instead (describe_images_public)"),
    "describe_images_public": Fact(("ImageOwnerAlias=system", "ImageFamily"), Source(
        url="https://alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-describeimages"),
        note="DescribeImages queries public images too (ImageOwnerAlias system: Alibaba Cloud's public images) and "
        "takes ImageFamily among its request parameters; paginated, 10 per page by default"),
    "run_instances_since": Fact("1.1.3", Source(_ALI, "version/version.go", _ALI_HEAD, "10-15"),
                                note="main after v1.1.2 is 1.1.3-dev, the first version that calls RunInstances"),
    "run_instances_call": Fact("RunInstances", Source(_ALI, "builder/ecs/step_create_instance.go", _ALI_HEAD,
                                                      "58-60"),
                               note="the instance is created with RunInstances (v1.1.2: CreateInstance)"),
    "eip_when_public_ip": Fact("AllocateEipAddress", Source(_ALI, "builder/ecs/step_config_eip.go", _ALI_HEAD,
                                                            "64-72"),
                               note="associate_public_ip_address allocates and associates an EIP in a VPC"),
    "run_instances_public_ip": Fact("InternetMaxBandwidthOut > 0", Source(
        url="https://help.aliyun.com/en/ecs/developer-reference/api-faq"),
        note="RunInstances with InternetMaxBandwidthOut above 0 gives the instance a static public IP itself"),
})

_TC = "hashicorp/packer-plugin-tencentcloud"
_TC_120 = "8e908fa9927de465f19acb20e5155ee4201a49e0"     # v1.2.0
_TC_PACKER_16 = "63c11711805a658c28bc5eeb39641806dc351ee9"  # the builder as Packer 1.6.6 shipped it (2020-11-17)
_TF = "tencentcloudstack/terraform-provider-tencentcloud"
_TF_HEAD = "f6970a90038400958503a0edab62c6c463baa7b0"
_CREATE_IMAGE = "https://tencentcloud.com/document/product/213/33276"
_TAG_LIMITS = "https://tencentcloud.com/document/product/651/13354"  # Tag: Use Limits

TENCENTCLOUD = fact_table("tencentcloud", {
    "force_poweroff": Fact("force_poweroff", Source(_TC, "builder/tencentcloud/cvm/step_create_image.go", _TC_120,
                                                    "41-47"),
                           note="sent as CreateImage's ForcePoweroff"),
    "force_poweroff_packer_16": Fact("force_poweroff", Source(_TC, "builder/tencentcloud/cvm/step_create_image.go",
                                                              _TC_PACKER_16, "40-44"),
                                     note="the same in the builder Packer 1.6.6 has built in"),
    "create_image_running": Fact("ForcePoweroff", Source(url=_CREATE_IMAGE),
                                 note="default false: the image is made from the running instance, which may miss "
                                 "data not yet written"),
    "artifact_id": Fact("{region}:{image_id}", Source(_TC, "builder/tencentcloud/cvm/artifact.go", _TC_120, "35-43"),
                        note="the artifact id: region:image pairs, sorted, comma-separated"),
    "image_tags": Fact("image_tags", Source(_TC, "builder/tencentcloud/cvm/step_create_image.go", _TC_120, "55-73"),
                       note="the plugin tags the image through CreateImage's TagSpecification; Packer 1.6.6's "
                       "builder has no such argument"),
    "source_image_name": Fact("source_image_name", Source(_TC, "builder/tencentcloud/cvm/run_config.go", _TC_120,
                                                          "36"),
                              note="a regular expression matched against image names"),
    "source_image_name_lookup": Fact("DescribeImages", Source(
        _TC, "builder/tencentcloud/cvm/step_check_source_image.go", _TC_120, "29-58"),
        note="one DescribeImages call filtered by instance type only (no limit or image type set); the first "
        "image whose name matches is used"),
    "tag_api": Fact("ModifyResourceTags", Source(_TF, "tencentcloud/services/tag/service_tencentcloud_tag.go",
                                                 _TF_HEAD, "31-59"),
                    note="Tencent's own Terraform provider tags a resource with the Tag API's ModifyResourceTags"),
    "image_resource": Fact("qcs::cvm:{region}:uin/:image/{image_id}", Source(
        _TF, "tencentcloud/common/common.go", _TF_HEAD, "424-430"),
        note="the six-segment resource name (account left empty), as the provider builds it for cvm images "
        "(tencentcloud/services/cvm/resource_tc_image.go:186)"),
    "tag_value_specials": Fact("+-=._:/@()[],;><", Source(url=_TAG_LIMITS),
                               note="besides letters, digits and inner spaces, the only characters tags may hold; "
                               "keys 1-127 and values 1-255 characters, no leading or trailing space"),
    "tags_per_call": Fact(10, Source(url=_TAG_LIMITS), note="tags are created at most 10 at a time"),
    "public_image_name_prefix": Fact("TencentOS", Source(_TF, "tencentcloud/services/cvm/data_source_tc_images.md",
                                                         _TF_HEAD, "31"),
                                     note="the provider's example finds TencentOS public images by names that "
                                     "start with TencentOS"),
    "tencentos_3": Fact("TencentOS Server 3", Source(_TF, "tencentcloud/services/cvm/data_source_tc_images.md",
                                                     _TF_HEAD, "23"),
                        note="OS name of the example: TencentOS Server 3.2 (Final)"),
    "tencentos_4": Fact("TencentOS Server 4", Source(_TF, "tencentcloud/services/as/resource_tc_as_scaling_config.md",
                                                     _TF_HEAD, "12"),
                        note="OS name of the example: TencentOS Server 4 for x86_64"),
})
