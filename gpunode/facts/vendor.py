"""Cloud vendor from DMI strings (as read from /sys/class/dmi/id)."""

from __future__ import annotations

AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"


def cloud_vendor(dmi: dict[str, str]) -> str | None:
    """aws | alibaba | tencent | gcp | azure, or None when nothing matches."""
    sys_vendor = dmi.get("sys_vendor", "").strip()
    product = dmi.get("product_name", "").strip()
    bios = dmi.get("bios_vendor", "").strip()
    uuids = (dmi.get("product_uuid", ""), dmi.get("hypervisor_uuid", ""))
    if (
        "Amazon EC2" in (sys_vendor, bios)
        or any(u.lower().startswith("ec2") for u in uuids)
        or "amazon" in dmi.get("product_version", "").lower()  # Xen-based EC2 (p3, g3)
    ):
        return "aws"
    if sys_vendor.startswith("Alibaba Cloud") or product == "Alibaba Cloud ECS":
        return "alibaba"
    if sys_vendor.startswith("Tencent Cloud") or product == "CVM":
        return "tencent"
    if sys_vendor == "Google" or product.startswith("Google Compute Engine"):
        return "gcp"
    if sys_vendor == "Microsoft Corporation" and dmi.get("chassis_asset_tag", "").strip() == AZURE_ASSET_TAG:
        return "azure"
    return None
