"""NFS mount options the storage vendors document (Alibaba Cloud NAS, Tencent Cloud CFS, AWS EFS), each with its page.

gpunode/steps/nfs/options.py builds its presets from this table (see gpunode/vendor_facts.py). `_netdev` in the
option strings is for fstab: systemd then waits for the network before mounting.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Source, fact_table

_NAS_MOUNT = "https://www.alibabacloud.com/help/en/nas/user-guide/mount-an-nfs-file-system-on-a-linux-ecs-instance"
_NAS_FAQ = "https://www.alibabacloud.com/help/doc-detail/184789.htm"
_CFS_PARAMS = "https://cloud.tencent.com/document/product/582/113840"
_CFS_FAQ = "https://intl.cloud.tencent.com/document/product/582/9551"
_EFS_SETTINGS = "https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html"
_EFS_HELPER = "https://docs.aws.amazon.com/efs/latest/ug/mount-helper-setting.html"

NFS_VENDORS = fact_table("nfs-vendors", {
    "alibaba_v3": Fact("vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,"
                       "noresvport", Source(url=_NAS_MOUNT),
                       "NFSv3 is recommended for performance; NFSv4.0 when several instances modify the same file "
                       "(it has file and range locks)"),
    "alibaba_v4": Fact("vers=4,minorversion=0,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,"
                       "noresvport", Source(url=_NAS_FAQ),
                       "the mount FAQ mounts a subdirectory with vers=4,minorversion=0,rsize=1048576,wsize=1048576,"
                       "hard,timeo=600,retrans=2,noresvport"),
    "alibaba_versions": Fact(("3", "4.0"), Source(url=_NAS_MOUNT)),
    "alibaba_default": Fact("3", Source(url=_NAS_MOUNT), "NFSv3 recommended for best access performance"),
    "tencent_v4": Fact("vers=4,minorversion=0,hard,timeo=600,retrans=2,_netdev,noresvport", Source(url=_CFS_PARAMS),
                       "vers 3 or 4.0; hard is the default and recommended (the client reconnects across CFS "
                       "failovers); noresvport recommended (failover changes the internal port)"),
    "tencent_v3": Fact("vers=3,nolock,proto=tcp,hard,timeo=600,retrans=2,_netdev,noresvport",
                       Source(url=_CFS_PARAMS), "the v4 options with vers=3 and nolock (nolock: locks stay local)"),
    "tencent_versions": Fact(("3", "4.0"), Source(url=_CFS_FAQ), "NFS v3.0/v4.0 (and SMB)"),
    "tencent_default": Fact("4.0", Source(url=_CFS_PARAMS),
                            "gpunode's choice: the page suggests vers=3 for metadata performance and vers=4 when "
                            "several clients edit one file; over v3 CFS exports /<fsid>, over v4 / (a default "
                            "change would change which export path works, so it stays)"),
    "efs": Fact("nfsvers={v},rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev",
                Source(url=_EFS_HELPER),
                "the options the EFS mount helper uses: nfsvers=4.1 on EC2 Linux, rsize/wsize 1048576, hard, "
                "timeo=600, retrans=2, noresvport (also the recommended settings page)"),
    "efs_versions": Fact(("4.0", "4.1"), Source(url=_EFS_SETTINGS)),
    "efs_default": Fact("4.1", Source(url=_EFS_HELPER), "nfsvers=4.1 when mounting on EC2 Linux instances"),
})
