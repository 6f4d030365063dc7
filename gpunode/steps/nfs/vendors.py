"""NFS mount options the storage vendors document (Alibaba Cloud NAS, Tencent Cloud CFS, AWS EFS), each with its page.

gpunode/steps/nfs/options.py builds its presets from this table (see gpunode/vendor_facts.py). `_netdev` in the
option strings is for fstab: systemd then waits for the network before mounting.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Pin, Source, fact_table

_NAS_MOUNT = "https://www.alibabacloud.com/help/en/nas/user-guide/mount-an-nfs-file-system-on-a-linux-ecs-instance"
_NAS_FAQ = "https://www.alibabacloud.com/help/doc-detail/184789.htm"
_CFS_PARAMS = "https://cloud.tencent.com/document/product/582/113840"
_CFS_FAQ = "https://intl.cloud.tencent.com/document/product/582/9551"
_EFS_SETTINGS = "https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html"
_EFS_HELPER = "https://docs.aws.amazon.com/efs/latest/ug/mount-helper-setting.html"
_NFS5 = "https://man7.org/linux/man-pages/man5/nfs.5.html"  # also Debian nfs-common's /usr/share/man/man5/nfs.5.gz
# Tencent Cloud API (THPC 2023-03-21) CFSOption.MountOption, as its Ruby SDK documents it: the NFS defaults
_CFS_OPTION = "https://rubydoc.info/gems/tencentcloud-sdk-thpc/TencentCloud/Thpc/V20230321/CFSOption"
CFS_CSI = Pin("TencentCloud/kubernetes-csi-tencentcloud", "defc12d0aa1cd9033474235ef3a670263c8fada4")

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
                       "failovers); noresvport recommended (failover changes the internal port). timeo and "
                       "retrans are not on this page: tencent_timeo_retrans"),
    "tencent_v3": Fact("vers=3,nolock,proto=tcp,hard,timeo=600,retrans=2,_netdev,noresvport",
                       Source(url=_CFS_PARAMS), "the v4 options with vers=3 and nolock (nolock: locks stay local)"),
    "tencent_api_defaults": Fact("vers=4.0,noresvport", Source(url=_CFS_OPTION),
                                 "Tencent's API default mount options: NFS 4.0 vers=4.0,noresvport; NFS 3.0 "
                                 "vers=3,nolock,proto=tcp,noresvport (no timeo, retrans or hard: the client's "
                                 "defaults)"),
    "tencent_timeo_retrans": Fact("timeo=600,retrans=2", Source(url=_NFS5),
                                  "gpunode's choice, not Tencent's: the Linux client's own defaults over TCP "
                                  "(timeo 600 deciseconds; each TCP request tried twice), written out so that a "
                                  "live mount is compared against known values and every vendor preset reads alike "
                                  "(Alibaba NAS and AWS EFS document these same values)"),
    "tencent_versions": Fact(("3", "4.0"), Source(url=_CFS_FAQ), "NFS v3.0/v4.0 (and SMB)"),
    "tencent_default": Fact("4.0", CFS_CSI.at("driver/cfs/node.go", "105-111"),
                            "gpunode's choice, the one Tencent's CFS CSI driver makes too (vers 4 unless an fsid "
                            "is given); the parameters page suggests vers=3 for metadata performance and vers=4 "
                            "when several clients edit one file; over v3 CFS exports /<fsid>, over v4 / (a default "
                            "change would change which export path works, so it stays)"),
    "tencent_csi_v3_fsid": Fact("fsid", CFS_CSI.at("driver/cfs/node.go", "101-103"),
                                "the CSI driver warns \"cfs v3 need fsid\" for vers 3 without the fsid attribute; "
                                "with it the driver mounts /<fsid><path> and adds noresvport,nolock,proto=tcp "
                                "(141-146, 138-140)"),
    "tencent_csi_vers": Fact("vers=<vers>", CFS_CSI.at("driver/cfs/node.go", "132-135"),
                             "the driver appends vers=<the vers attribute> after the options attribute; a "
                             "minorversion in options is kept, so vers 4 with minorversion=0 mounts NFS 4.0"),
    "efs": Fact("nfsvers={v},rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev",
                Source(url=_EFS_HELPER),
                "the options the EFS mount helper uses: nfsvers=4.1 on EC2 Linux, rsize/wsize 1048576, hard, "
                "timeo=600, retrans=2, noresvport (also the recommended settings page)"),
    "efs_versions": Fact(("4.0", "4.1"), Source(url=_EFS_SETTINGS)),
    "efs_default": Fact("4.1", Source(url=_EFS_HELPER), "nfsvers=4.1 when mounting on EC2 Linux instances"),
})
