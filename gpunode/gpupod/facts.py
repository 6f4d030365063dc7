"""What Alibaba Cloud ECI and Tencent Cloud EKS (super nodes) document for a GPU pod: annotation keys, value forms
and the rules between them, each with the page (or the vendor's docs repository file) it was read from.

The seed guides (../shared/seeds/000 and 002, the vendors' own tutorials) state some rules too; those are cited as
the vendor page each tutorial was published as.
"""

from __future__ import annotations

from gpunode.vendor_facts import Fact, Source, fact_table

# Alibaba Cloud: ACK "Specify the compute specification when creating an ECI pod" (the eci-use-specs rules), ECI
# "Create a GPU-accelerated ECI pod" (the GPU families ECI runs), the ECI annotation reference, and ACK Knative's
# GPU page (the nvidia.com/gpu limit is required).
_ECI_SPECS = "https://www.alibabacloud.com/help/en/ack/serverless-kubernetes/user-guide/create-an-eci-pod"
_ECI_SPECS_ZH = "https://help.aliyun.com/zh/ack/create-an-eci-pod"
_ECI_GPU = "https://help.aliyun.com/en/eci/user-guide/create-a-pod-by-specifying-the-gpu-specification"
_ECI_ANNOTATIONS = "https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/pod-annotations-1"
_ECI_KNATIVE = ("https://help.aliyun.com/en/ack/serverless-kubernetes/user-guide/"
                "configure-gpu-resources-for-a-knative-service")

ECI = fact_table("alibaba-eci", {
    "specs_annotation": Fact("k8s.aliyun.com/eci-use-specs", Source(url=_ECI_ANNOTATIONS),
                             "one or more pod specifications, each a vCPU-memory pair (2-4Gi) or an ECS instance "
                             "type; set in the pod's metadata (a workload's spec.template.metadata), read only at "
                             "creation"),
    "specs_max": Fact(5, Source(url=_ECI_SPECS_ZH), "specifications in priority order, at most 5 at a time"),
    "gpu_specs_alone": Fact(True, Source(url=_ECI_SPECS),
                            "GPU (like local-disk and Arm) specifications may only be listed with their own kind: "
                            "mixing them with vCPU-memory or other ECS types is not supported"),
    "eci_label": Fact(("alibabacloud.com/eci", "true"), Source(url=_ECI_SPECS_ZH),
                      "the page's GPU example labels the pod template alibabacloud.com/eci: \"true\""),
    "gpu_limit_required": Fact("nvidia.com/gpu", Source(url=_ECI_KNATIVE),
                               "the nvidia.com/gpu limit is required beside the GPU instance type in "
                               "eci-use-specs; without it the pod fails to start"),
    "gpu_families": Fact(("gn5", "gn5i", "gn6e", "gn6i", "gn6v", "gn7", "gn7e", "gn7i", "gn7s", "gn8ia", "gn8is",
                          "sgn7i-vws", "vgn6i-vws", "vgn7i-vws"), Source(url=_ECI_GPU),
                         "the GPU-accelerated (gn*) and vGPU-accelerated (*-vws) instance families ECI supports; "
                         "the NVIDIA driver comes pre-installed in each instance"),
})

# Tencent Cloud: the super node annotation page (its Markdown source is in Tencent's docs repository
# tencentyun/qcloud-documents; two versions read through the code index by their text: the current one, "指定 GPU",
# and the older EKS table with the required/optional column). The 002 seed guide (Tencent's own EKS tutorial) adds
# that once gpu-count is written, cpu and mem must be too; the table's cpu/mem rows say the same of that pair.
_EKS_ANNOTATIONS = "https://cloud.tencent.com/document/product/457/44173"
_K8S_GPUS = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"

EKS = fact_table("tencent-eks", {
    "gpu_type_annotation": Fact("eks.tke.cloud.tencent.com/gpu-type", Source(url=_EKS_ANNOTATIONS),
                                "required when the pod needs a GPU; an unsupported model is an error"),
    "gpu_types": Fact(("V100", "1/4*T4", "1/2*T4", "T4"), Source(url=_EKS_ANNOTATIONS),
                      "the supported models; several in priority order, comma-separated (\"T4,V100\")"),
    "gpu_count_annotation": Fact("eks.tke.cloud.tencent.com/gpu-count", Source(url=_EKS_ANNOTATIONS),
                                 "optional: the number of GPUs, in cards, without a unit"),
    "cpu_annotation": Fact("eks.tke.cloud.tencent.com/cpu", Source(url=_EKS_ANNOTATIONS),
                           "optional: cores, without a unit; given, it needs mem too"),
    "mem_annotation": Fact("eks.tke.cloud.tencent.com/mem", Source(url=_EKS_ANNOTATIONS),
                           "optional: memory, and it must be in Gi (a value in G is a parameter error); given, it "
                           "needs cpu too"),
    "cpu_mem_together": Fact(True, Source(url=_EKS_ANNOTATIONS),
                             "cpu and mem are each optional, but given, both must be (and be a supported "
                             "specification); the seed tutorial: gpu-type alone is enough, and once gpu-count is "
                             "written, cpu and mem must be written with it"),
    "limit_required": Fact("nvidia.com/gpu", Source(url=_EKS_ANNOTATIONS),
                           "the GPU count and specification are set by the pod's own request and limit (the "
                           "annotation names the model); the seed tutorial: the limit is required, an annotation "
                           "alone finds no card"),
    "request_equals_limit": Fact(True, Source(url=_K8S_GPUS),
                                 "GPUs are only specified in limits; requests, when given, must equal the limits"),
})
