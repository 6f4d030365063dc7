#!/usr/bin/env python3
"""gpunode's node-side acceptance runner: is this node fit to take GPU jobs?

One self-contained file, Python 3.6+ standard library only. `gpunode accept` ships it over SSH; the Slurm, Kubernetes
and first-boot forms install it as /usr/local/libexec/gpunode/accept and read /etc/gpunode/accept.json (optional:
{"tier": ..., "budget": ..., "expect_gpus": ..., "expect_model": ...}; command-line options win).

A tier runs its checks in order under a time budget. Every check has an estimated cost and a hard timeout; a check
whose estimate does not fit in what is left of the budget is not started: the tier stops there and says which checks
it did not run and why (status "budget"). Tools run in their own process group and are killed at their timeout.

Exit codes: 0 pass, 1 a check failed, 2 could not judge (a check could not run to a verdict, or the budget ran out).
--format npd follows node-problem-detector's custom plugin protocol: 0 OK, 1 NonOK, 2 Unknown, one line of at most
80 characters (kubernetes/node-problem-detector@6632ca67148f pkg/custompluginmonitor/types/types.go:28-30 and
types/config.go:32 defaultMaxOutputLength = 80; plugin/plugin.go:325-350 trims, cuts and maps the exit code).

gpunode's own CUDA probe (--probe, run by the runner in a child process so a hung driver call is killed at its
timeout) uses the CUDA driver API through ctypes: no compiler, nothing downloaded. Signatures and CUresult values are
NVIDIA's cuda.h of CUDA 12.6 (CUDA_VERSION 12060), read at
zspace/system.cuda-12.6@b3d92c837713411301ae5df45b0c7758df7d931e include/cuda.h (line numbers beside each use
below); the `_v2` entry points are the ones cuda.h's #defines map the plain names to (lines 90-132), and
libcuda.so.1 is the name NVIDIA's own sample dlopens
(NVIDIA/cuda-samples@c94ff366aed1 Samples/0_Introduction/matrixMulDynlinkJIT/cuda_drvapi_dynlink.c:303).
"""

import argparse
import contextlib
import ctypes
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

VERSION = 1
EXIT_PASS, EXIT_FAIL, EXIT_UNKNOWN = 0, 1, 2
CONFIG_PATH = "/etc/gpunode/accept.json"
NPD_MAX_OUTPUT = 80  # node-problem-detector types/config.go:32
SLURM_REASON_MAX = 200  # gpunode's own cap: a drain reason a person reads in `sinfo -R`
TIERS = ("quick", "standard", "burn-in")
DEFAULT_BUDGET = {"quick": 60.0, "standard": 1200.0, "burn-in": 10800.0}
# how long the budget machinery may take around the checks (starting children, JSON): kept out of the estimates
RESERVE_S = 1.0
GIB = 1 << 30

# How to install the tools, as their vendors document it: DCGM's installation page (the package is
# datacenter-gpu-manager in NVIDIA's CUDA repository index, developer.download.nvidia.com/compute/cuda/repos/
# ubuntu2404/x86_64/Packages); nccl-tests' README (NVIDIA/nccl-tests@01d6761451d6 README.md "Build": `make`,
# CUDA_HOME / NCCL_HOME); nvbandwidth's -t takes several testcases (NVIDIA/nvbandwidth@66746a3bef61
# nvbandwidth.cpp:211, multitoken).
DCGM_INSTALL = ("install DCGM 4 with gpunode's dcgm step: "
                "`gpunode provision -H HOST --playbook gpu-node --var install_dcgm=true --tags dcgm` (or by hand as "
                "https://docs.nvidia.com/datacenter/dcgm/latest/installation.html says)")
NCCL_TESTS_INSTALL = ("build NVIDIA/nccl-tests as its README says (`make CUDA_HOME=... NCCL_HOME=...`) and put "
                      "build/all_reduce_perf on PATH, or name its folder in /etc/gpunode/accept.json "
                      "(tool_dirs: {\"all_reduce_perf\": \"/opt/nccl-tests/build\"})")
NVBANDWIDTH_NOTE = "nvbandwidth is not installed: gpunode's own copy probe measured instead"

# CUresult values: cuda.h (CUDA 12.6) enum cudaError_enum; the comment is each value's line in that file.
CURESULT = {
    0: "CUDA_SUCCESS",  # 2348
    1: "CUDA_ERROR_INVALID_VALUE",  # 2354
    2: "CUDA_ERROR_OUT_OF_MEMORY",  # 2360
    3: "CUDA_ERROR_NOT_INITIALIZED",  # 2366
    4: "CUDA_ERROR_DEINITIALIZED",  # 2371
    5: "CUDA_ERROR_PROFILER_DISABLED",  # 2378
    6: "CUDA_ERROR_PROFILER_NOT_INITIALIZED",  # 2386
    7: "CUDA_ERROR_PROFILER_ALREADY_STARTED",  # 2393
    8: "CUDA_ERROR_PROFILER_ALREADY_STOPPED",  # 2400
    34: "CUDA_ERROR_STUB_LIBRARY",  # 2407
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",  # 2414
    100: "CUDA_ERROR_NO_DEVICE",  # 2420
    101: "CUDA_ERROR_INVALID_DEVICE",  # 2427
    102: "CUDA_ERROR_DEVICE_NOT_LICENSED",  # 2432
    200: "CUDA_ERROR_INVALID_IMAGE",  # 2438
    201: "CUDA_ERROR_INVALID_CONTEXT",  # 2450
    202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",  # 2459
    205: "CUDA_ERROR_MAP_FAILED",  # 2464
    206: "CUDA_ERROR_UNMAP_FAILED",  # 2469
    207: "CUDA_ERROR_ARRAY_IS_MAPPED",  # 2475
    208: "CUDA_ERROR_ALREADY_MAPPED",  # 2480
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",  # 2488
    210: "CUDA_ERROR_ALREADY_ACQUIRED",  # 2493
    211: "CUDA_ERROR_NOT_MAPPED",  # 2498
    212: "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",  # 2504
    213: "CUDA_ERROR_NOT_MAPPED_AS_POINTER",  # 2510
    214: "CUDA_ERROR_ECC_UNCORRECTABLE",  # 2516
    215: "CUDA_ERROR_UNSUPPORTED_LIMIT",  # 2522
    216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",  # 2529
    217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",  # 2535
    218: "CUDA_ERROR_INVALID_PTX",  # 2540
    219: "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",  # 2545
    220: "CUDA_ERROR_NVLINK_UNCORRECTABLE",  # 2551
    221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",  # 2556
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",  # 2562
    223: "CUDA_ERROR_JIT_COMPILATION_DISABLED",  # 2567
    224: "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",  # 2573
    225: "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",  # 2579
    300: "CUDA_ERROR_INVALID_SOURCE",  # 2585
    301: "CUDA_ERROR_FILE_NOT_FOUND",  # 2590
    302: "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",  # 2595
    303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",  # 2600
    304: "CUDA_ERROR_OPERATING_SYSTEM",  # 2605
    400: "CUDA_ERROR_INVALID_HANDLE",  # 2611
    401: "CUDA_ERROR_ILLEGAL_STATE",  # 2617
    402: "CUDA_ERROR_LOSSY_QUERY",  # 2625
    500: "CUDA_ERROR_NOT_FOUND",  # 2632
    600: "CUDA_ERROR_NOT_READY",  # 2640
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",  # 2649
    701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",  # 2660
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",  # 2670
    703: "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",  # 2676
    704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",  # 2683
    705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",  # 2690
    708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",  # 2696
    709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",  # 2703
    710: "CUDA_ERROR_ASSERT",  # 2711
    711: "CUDA_ERROR_TOO_MANY_PEERS",  # 2718
    712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",  # 2724
    713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",  # 2730
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR",  # 2739
    715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",  # 2747
    716: "CUDA_ERROR_MISALIGNED_ADDRESS",  # 2756
    717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",  # 2767
    718: "CUDA_ERROR_INVALID_PC",  # 2775
    719: "CUDA_ERROR_LAUNCH_FAILED",  # 2786
    720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",  # 2795
    800: "CUDA_ERROR_NOT_PERMITTED",  # 2800
    801: "CUDA_ERROR_NOT_SUPPORTED",  # 2806
    802: "CUDA_ERROR_SYSTEM_NOT_READY",  # 2815
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",  # 2822
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",  # 2831
    805: "CUDA_ERROR_MPS_CONNECTION_FAILED",  # 2836
    806: "CUDA_ERROR_MPS_RPC_FAILURE",  # 2841
    807: "CUDA_ERROR_MPS_SERVER_NOT_READY",  # 2847
    808: "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",  # 2852
    809: "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",  # 2857
    810: "CUDA_ERROR_MPS_CLIENT_TERMINATED",  # 2862
    811: "CUDA_ERROR_CDP_NOT_SUPPORTED",  # 2867
    812: "CUDA_ERROR_CDP_VERSION_MISMATCH",  # 2872
    900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",  # 2878
    901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",  # 2884
    902: "CUDA_ERROR_STREAM_CAPTURE_MERGE",  # 2890
    903: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",  # 2895
    904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",  # 2901
    905: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",  # 2908
    906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",  # 2914
    907: "CUDA_ERROR_CAPTURED_EVENT",  # 2920
    908: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",  # 2927
    909: "CUDA_ERROR_TIMEOUT",  # 2932
    910: "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",  # 2938
    911: "CUDA_ERROR_EXTERNAL_DEVICE",  # 2948
    912: "CUDA_ERROR_INVALID_CLUSTER_SIZE",  # 2953
    913: "CUDA_ERROR_FUNCTION_NOT_LOADED",  # 2959
    914: "CUDA_ERROR_INVALID_RESOURCE_TYPE",  # 2965
    915: "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",  # 2971
    999: "CUDA_ERROR_UNKNOWN",  # 2976
}

# The probe's kernel: out[i] = i * 3 + 7 for i < n. PTX ISA 5.0 (CUDA 8.0, the release that added sm_60, NVIDIA's
# table: https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history, mirrored in
# NVIDIA/cuda-python cuda/bindings/utils/_ptx_utils.py), target sm_60 (Pascal, P100: the oldest GPU gpunode
# supports): the driver JIT-compiles it for any newer GPU. The layout follows NVIDIA's ptxjit sample's kernel
# (a .visible .entry with one .u64 pointer parameter, cvta.to.global, the %ctaid/%ntid/%tid index, st.global.u32).
PTX_ENTRY = "gpunode_fill"
PTX = r"""
.version 5.0
.target sm_60
.address_size 64

.visible .entry gpunode_fill(
	.param .u64 gpunode_fill_param_0,
	.param .u32 gpunode_fill_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [gpunode_fill_param_0];
	ld.param.u32 	%r1, [gpunode_fill_param_1];
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r2, %r3, %r4;
	setp.ge.u32 	%p1, %r5, %r1;
	@%p1 bra 	DONE;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r5, 4;
	add.s64 	%rd4, %rd2, %rd3;
	mad.lo.s32 	%r6, %r5, 3, 7;
	st.global.u32 	[%rd4], %r6;
DONE:
	ret;
}
"""


def expected_fill(i):
    """What the kernel writes at index i."""
    return (i * 3 + 7) & 0xFFFFFFFF


def cu_name(code):
    """A CUresult as cuda.h names it."""
    return CURESULT.get(code, "CUresult %d" % code)


def finding(fid, severity, summary, remedy="", gpu=None, evidence="", link=None):
    """One conclusion; `gpu` is the GPU's dict (index, uuid, bus_id, name) when it names one."""
    part = {}
    if gpu:
        part = {k: gpu.get(k) for k in ("index", "uuid", "bus_id", "name") if gpu.get(k) is not None}
    if link:
        part["link"] = link
    return {"id": fid, "severity": severity, "summary": summary, "remedy": remedy, "evidence": evidence[:2000],
            "part": part}


def gpu_label(gpu):
    """"GPU 3 (GPU-uuid, 00000000:07:00.0)"."""
    if gpu is None:
        return "GPU"
    ids = ", ".join(str(gpu[k]) for k in ("uuid", "bus_id") if gpu.get(k))
    return "GPU %s%s" % (gpu.get("index", "?"), " (%s)" % ids if ids else "")


def run_tool(argv, timeout):
    """(rc, output, timed_out): the tool in its own session, killed with its children at the timeout;
    rc None when it could not start."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        return None, str(exc), False
    try:
        out, _ = proc.communicate(timeout=max(timeout, 0.1))
        return proc.returncode, out.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return proc.returncode, out.decode("utf-8", "replace"), True


def tool(name, ctx):
    """The tool's path: PATH, or the folder the config names for it."""
    folder = ctx.config.get("tool_dirs", {}).get(name) if isinstance(ctx.config.get("tool_dirs"), dict) else None
    if folder and os.access(os.path.join(folder, name), os.X_OK):
        return os.path.join(folder, name)
    return shutil.which(name)


def bus_key(bus_id):
    """A PCI address comparable between nvidia-smi (00000000:07:00.0) and lspci -D (0000:07:00.0)."""
    m = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", (bus_id or "").strip())
    if not m:
        return (bus_id or "").strip().lower()
    return "%04x:%s:%s.%s" % (int(m.group(1), 16), m.group(2).lower(), m.group(3).lower(), m.group(4))


# ---------------------------------------------------------------- the CUDA probe (runs in a child process)

class CudaError(Exception):
    """A driver API call that did not return CUDA_SUCCESS."""

    def __init__(self, call, code):
        Exception.__init__(self, "%s returned %s (%d)" % (call, cu_name(code), code))
        self.call, self.code, self.name = call, code, cu_name(code)


class Driver:
    """The few driver API entry points the probe calls, typed as cuda.h declares them."""

    # name -> argtypes; every function returns CUresult (an int enum). cuda.h lines in the comments.
    SIGNATURES = {
        "cuInit": [ctypes.c_uint],                                                      # 4721
        "cuDriverGetVersion": [ctypes.POINTER(ctypes.c_int)],                           # 4759
        "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],                             # 4831
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],                    # 4802
        "cuDeviceGetName": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],               # 4863
        "cuDeviceGetPCIBusId": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],           # 9126
        "cuDeviceGetUuid": [ctypes.c_char_p, ctypes.c_int],                             # 4896 (CUuuid: char[16], 304)
        "cuCtxCreate_v2": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int],  # 5945
        "cuCtxDestroy_v2": [ctypes.c_void_p],                                           # 6289
        "cuCtxSetCurrent": [ctypes.c_void_p],                                           # 6387
        "cuCtxSynchronize": [],                                                         # 6562
        "cuModuleLoadData": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p],         # 7274
        "cuModuleGetFunction": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p],  # 7441
        "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t],            # 8518
        "cuMemFree_v2": [ctypes.c_uint64],                                              # 8617
        "cuMemAllocHost_v2": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t],        # 8702
        "cuMemFreeHost": [ctypes.c_void_p],                                             # 8732
        "cuMemcpyHtoD_v2": [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t],         # 9582
        "cuMemcpyDtoH_v2": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t],         # 9618
        "cuMemcpyPeer": [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t],  # 9546
        "cuDeviceCanAccessPeer": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],  # 23263
        "cuCtxEnablePeerAccess": [ctypes.c_void_p, ctypes.c_uint],                      # 23316
        "cuLaunchKernel": [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                                                     ctypes.c_void_p],  # 17038-17048
    }

    def __init__(self, lib):
        self.lib = lib
        for name, argtypes in self.SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int

    def __call__(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise CudaError(name, code)


def _uuid_text(raw):
    """CUuuid bytes as nvidia-smi prints a UUID: GPU-8-4-4-4-12 hex."""
    h = "".join("%02x" % b for b in bytearray(raw))
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def _device(cu, ordinal):
    dev = ctypes.c_int()
    cu("cuDeviceGet", ctypes.byref(dev), ordinal)
    name, bus, uuid = ctypes.create_string_buffer(256), ctypes.create_string_buffer(64), ctypes.create_string_buffer(16)
    cu("cuDeviceGetName", name, 256, dev)
    cu("cuDeviceGetPCIBusId", bus, 64, dev)
    cu("cuDeviceGetUuid", uuid, dev)
    return dev, {"index": ordinal, "name": name.value.decode("utf-8", "replace"),
                 "bus_id": bus.value.decode("ascii", "replace"), "uuid": _uuid_text(uuid.raw[:16])}


def kernel_params(*args):
    """cuLaunchKernel's kernelParams: an array of N pointers, each pointing to the value of one kernel parameter
    (cuda.h lines 16932-16937); the values must outlive the launch (the caller keeps them)."""
    return (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))


def _kernel(cu, n=1 << 20):
    """Load the PTX (the driver JIT-compiles it), run it over n ints, check every value."""
    module, fn, dptr = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    cu("cuModuleLoadData", ctypes.byref(module), PTX.encode("ascii") + b"\0")
    cu("cuModuleGetFunction", ctypes.byref(fn), module, PTX_ENTRY.encode("ascii"))
    cu("cuMemAlloc_v2", ctypes.byref(dptr), n * 4)
    count = ctypes.c_uint(n)
    params = kernel_params(dptr, count)
    block = 256
    cu("cuLaunchKernel", fn, (n + block - 1) // block, 1, 1, block, 1, 1, 0, None, params, None)
    cu("cuCtxSynchronize")
    out = (ctypes.c_uint32 * n)()
    cu("cuMemcpyDtoH_v2", ctypes.cast(out, ctypes.c_void_p), dptr.value, n * 4)
    cu("cuMemFree_v2", dptr.value)
    wrong = [i for i in range(0, n, 997) if out[i] != expected_fill(i)]
    if out[n - 1] != expected_fill(n - 1):
        wrong.append(n - 1)
    return {"elements": n, "checked": len(range(0, n, 997)) + 1, "wrong": len(wrong),
            "first_wrong": wrong[0] if wrong else None}


def _timed(cu, copy, size, reps):
    copy()  # warm-up: the first copy pays for mappings the timed ones do not
    cu("cuCtxSynchronize")
    start = time.perf_counter()
    for _ in range(reps):
        copy()
    cu("cuCtxSynchronize")
    seconds = time.perf_counter() - start
    return round(size * reps / seconds / 1e9, 2) if seconds > 0 else None


def _host_bandwidth(cu, size, reps):
    """Pinned host <-> device copy bandwidth (GB/s, 1e9 bytes, as nvbandwidth reports)."""
    host, dptr = ctypes.c_void_p(), ctypes.c_uint64()
    cu("cuMemAllocHost_v2", ctypes.byref(host), size)
    cu("cuMemAlloc_v2", ctypes.byref(dptr), size)
    try:
        h2d = _timed(cu, lambda: cu("cuMemcpyHtoD_v2", dptr.value, host, size), size, reps)
        d2h = _timed(cu, lambda: cu("cuMemcpyDtoH_v2", host, dptr.value, size), size, reps)
    finally:
        cu("cuMemFree_v2", dptr.value)
        cu("cuMemFreeHost", host)
    return h2d, d2h


def _peer_copy(cu, dst, dst_ctx, src, src_ctx, size):
    return lambda: cu("cuMemcpyPeer", dst, dst_ctx, src, src_ctx, size)


def _peer(cu, devs, ctxs, size, reps):
    """GPU-to-GPU copy bandwidth per ordered pair; peer access enabled where the driver allows it."""
    pairs = []
    bufs = []
    for ctx in ctxs:
        cu("cuCtxSetCurrent", ctx)
        d = ctypes.c_uint64()
        cu("cuMemAlloc_v2", ctypes.byref(d), size)
        bufs.append(d.value)
    for i, src_ctx in enumerate(ctxs):
        for j, dst_ctx in enumerate(ctxs):
            if i == j:
                continue
            can = ctypes.c_int()
            cu("cuDeviceCanAccessPeer", ctypes.byref(can), devs[j], devs[i])
            if can.value:
                cu("cuCtxSetCurrent", dst_ctx)
                try:
                    cu("cuCtxEnablePeerAccess", src_ctx, 0)
                except CudaError as exc:
                    if exc.name != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
                        raise
            cu("cuCtxSetCurrent", dst_ctx)
            gbs = _timed(cu, _peer_copy(cu, bufs[j], dst_ctx, bufs[i], src_ctx, size), size, reps)
            pairs.append({"src": i, "dst": j, "gbs": gbs, "peer_access": bool(can.value)})
    for k, ctx in enumerate(ctxs):
        cu("cuCtxSetCurrent", ctx)
        cu("cuMemFree_v2", bufs[k])
    return pairs


def _probe_device(cu, ordinal, mode, iterations, size, reps):
    """One GPU: its identity, a context, the kernel (iterations times), and in bandwidth mode its host copies."""
    dev, info = _device(cu, ordinal)
    ctx = ctypes.c_void_p()
    try:
        cu("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
        for _ in range(iterations):
            info["kernel"] = _kernel(cu)
            if info["kernel"]["wrong"]:
                break
        if mode == "bandwidth":
            info["h2d_gbs"], info["d2h_gbs"] = _host_bandwidth(cu, size, reps)
    except CudaError as exc:
        info["error"] = {"call": exc.call, "code": exc.code, "name": exc.name}
    return dev, ctx, info


def probe(mode="kernel", iterations=1, size=64 << 20, reps=8, library="libcuda.so.1"):
    """The probe's result as a dict (never raises for a driver error: it is reported)."""
    result = {"library": library, "mode": mode, "devices": [], "pairs": []}
    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:
        result["load_error"] = str(exc)
        return result
    try:
        cu = Driver(lib)
    except AttributeError as exc:
        result["load_error"] = "%s lacks a driver API entry point: %s" % (library, exc)
        return result
    try:
        cu("cuInit", 0)
        version, count = ctypes.c_int(), ctypes.c_int()
        cu("cuDriverGetVersion", ctypes.byref(version))
        result["driver_api_version"] = version.value
        cu("cuDeviceGetCount", ctypes.byref(count))
    except CudaError as exc:
        result["init_error"] = {"call": exc.call, "code": exc.code, "name": exc.name}
        return result
    devs, ctxs = [], []
    for ordinal in range(count.value):
        try:
            dev, ctx, info = _probe_device(cu, ordinal, mode, iterations, size, reps)
        except CudaError as exc:
            info = {"index": ordinal, "error": {"call": exc.call, "code": exc.code, "name": exc.name}}
            dev, ctx = None, ctypes.c_void_p()
        result["devices"].append(info)
        if ctx.value and "error" not in info:
            devs.append(dev)
            ctxs.append(ctx)
    if mode == "bandwidth" and len(ctxs) > 1:
        try:
            result["pairs"] = _peer(cu, devs, ctxs, size, reps)
        except CudaError as exc:
            result["peer_error"] = {"call": exc.call, "code": exc.code, "name": exc.name}
    for ctx in ctxs:
        with contextlib.suppress(CudaError):
            cu("cuCtxDestroy_v2", ctx)
    return result


def ptx_problems(text=PTX):
    """A syntax sanity check of the embedded PTX (no GPU needed): header directives, balanced braces, every
    instruction ended by ';', every register used declared, every branch target defined."""
    problems = []
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for directive in (".version ", ".target ", ".address_size 64"):
        if not any(ln.startswith(directive) for ln in lines[:3]):
            problems.append("missing %s in the header" % directive.strip())
    if text.count("{") != text.count("}") or text.count("(") != text.count(")"):
        problems.append("unbalanced braces or parentheses")
    declared = {}
    for m in re.finditer(r"\.reg\s+\.\w+\s+%(\w+?)<(\d+)>;", text):
        declared[m.group(1)] = int(m.group(2))
    for m in re.finditer(r"%([a-z]+)(\d+)\b", text):
        prefix, number = m.group(1), int(m.group(2))
        if prefix in ("tid", "ntid", "ctaid"):
            continue
        if prefix not in declared or number >= declared[prefix]:
            problems.append("register %%%s%d used but not declared" % (prefix, number))
    labels = set(re.findall(r"^(\w+):\s*$", text, re.M))
    for target in re.findall(r"\bbra\s+(\w+);", text):
        if target not in labels:
            problems.append("branch to undefined label %s" % target)
    body = text[text.index("{") + 1:text.rindex("}")]
    for ln in body.splitlines():
        ln = ln.strip()
        if ln and not ln.endswith(":") and not ln.endswith(";"):
            problems.append("statement without ';': %s" % ln)
    if ".entry %s(" % PTX_ENTRY not in text:
        problems.append("entry %s not declared" % PTX_ENTRY)
    return problems


# ---------------------------------------------------------------- the checks

class Context:
    """What the checks share: options, config, and what earlier checks learned (the GPUs)."""

    def __init__(self, args, config):
        self.args, self.config = args, config
        self.gpus = []          # from nvidia-smi: index, uuid, bus_id, name, persistence, memory_mib
        self.pci = []           # (bus key, class) of NVIDIA devices lspci lists
        self.smi_ok = False

    @property
    def nvswitches(self):
        return [bus for bus, cls in self.pci if cls == "0680"]

    def gpu(self, index=None, bus_id=None):
        for gpu in self.gpus:
            if index is not None and str(gpu.get("index")) == str(index):
                return gpu
            if bus_id is not None and bus_key(gpu.get("bus_id")) == bus_key(bus_id):
                return gpu
        return {"index": index, "bus_id": bus_id} if index is not None or bus_id else None


# Field names as `nvidia-smi --help-query-gpu` prints them (its output kept at
# https://gist.github.com/Jaid/5e3b3bf4234078a1828fbfa9338c1514: "pci.bus_id" is "domain:bus:device.function" in hex);
# --format=csv,noheader,nounits and -q as NVIDIA's man page gives them
# (nvidia-smi 610.43's man page as packaged: https://man.archlinux.org/man/nvidia-smi.1.raw).
SMI_QUERY = "index,uuid,pci.bus_id,name,persistence_mode,memory.total"
_LOST = re.compile(r"fallen off the bus|GPU is lost|Unable to determine the device handle|requires reset", re.I)
# lspci -D -n: "0000:07:00.0 0302: 10de:20b2 (rev a1)"; classes as gpunode/parsers/lspci.py reads them
_LSPCI = re.compile(r"^([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+([0-9a-fA-F]{4}):\s+10de:", re.M)


def check_nvidia_smi(ctx, timeout):
    """nvidia-smi present and answering; every GPU on the PCI bus known to the driver (none fallen off the bus)."""
    smi = tool("nvidia-smi", ctx)
    lspci = shutil.which("lspci")
    res = {"status": "pass", "findings": [], "raw": {}}
    if lspci:
        rc, out, _ = run_tool([lspci, "-D", "-n", "-d", "10de:"], min(timeout, 10))
        res["raw"]["lspci"] = out
        ctx.pci = [(bus_key(m.group(1)), m.group(2)) for m in _LSPCI.finditer(out)]
    if not smi:
        res["findings"].append(finding("nvidia-smi-missing", "critical", "nvidia-smi is not installed: no NVIDIA "
                                       "driver to run GPU jobs", "install the driver: gpunode provision -i INVENTORY "
                                       "-l HOST --playbook gpu-node"))
        return res
    argv = [smi, "--query-gpu=" + SMI_QUERY, "--format=csv,noheader,nounits"]
    rc, out, timed_out = run_tool(argv, timeout)
    res.update(command=" ".join(argv[1:]), rc=rc)
    res["raw"]["nvidia-smi"] = out
    if timed_out:
        res["status"] = "timeout"
        res["findings"].append(finding("nvidia-smi-hung", "critical", "nvidia-smi did not answer in %.0f s" % timeout,
                                       "a hung driver: check `dmesg` for Xid errors, reset the GPUs or reboot"))
        return res
    for line in out.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 6 and cells[0].isdigit():
            mem = cells[5]
            ctx.gpus.append({"index": int(cells[0]), "uuid": cells[1], "bus_id": cells[2], "name": cells[3],
                             "persistence": cells[4], "memory_mib": int(mem) if mem.isdigit() else None})
    lost = [ln.strip() for ln in out.splitlines() if _LOST.search(ln)]
    if lost:
        res["findings"].append(finding("gpu-lost", "critical", "nvidia-smi reports a GPU lost: %s" % lost[0],
                                       "drain the node; reset the GPU (`nvidia-smi -r -i N`) or reboot; a GPU that "
                                       "falls off the bus again is RMA", evidence="\n".join(lost)))
    elif rc != 0:
        res["findings"].append(finding("nvidia-smi-failed", "critical", "nvidia-smi failed (exit %s): %s" % (
            rc, (out.strip().splitlines() or ["no output"])[0]), "see the driver's state: `dmesg | grep -i nvrm`; "
            "reinstall the driver with gpunode provision -i INVENTORY -l HOST --playbook gpu-node", evidence=out))
    known = {bus_key(g["bus_id"]) for g in ctx.gpus}
    for bus, cls in ctx.pci:
        if cls in ("0300", "0302") and bus not in known:
            res["findings"].append(finding(
                "gpu-not-in-driver", "critical", "GPU at PCI %s is on the bus but nvidia-smi does not list it "
                "(fallen off the bus, or the driver failed to bind it)" % bus,
                "`dmesg | grep -i -e xid -e %s`; reset or reseat that GPU, reboot; RMA if it stays" % bus,
                gpu={"bus_id": bus}))
    ctx.smi_ok = rc == 0 and bool(ctx.gpus)
    res["measurements"] = {"gpus": len(ctx.gpus), "pci_gpus": len([1 for _, c in ctx.pci if c in ("0300", "0302")]),
                           "nvswitches": len(ctx.nvswitches)}
    if not ctx.gpus and not res["findings"]:
        res["findings"].append(finding("no-gpus", "critical", "nvidia-smi lists no GPU", "check `lspci -d 10de:`"))
    return res


def check_gpu_count(ctx, timeout):
    """The GPU count and model against the expected ones (--expect-gpus, --expect-model, or the config)."""
    expect, model = ctx.args.expect_gpus, ctx.args.expect_model
    have = len(ctx.gpus)
    other = [g for g in ctx.gpus if model and model.lower() not in (g.get("name") or "").lower()]
    if other:
        return {"status": "fail", "findings": [finding(
            "gpu-model", "critical", "%s is a %s, not the expected %s" % (gpu_label(g), g.get("name"), model),
            "a node of another type, or --expect-model is wrong", gpu=g) for g in other]}
    if expect is None and not have:
        return {"status": "skip", "findings": [], "reason": "no GPU list to count (see nvidia-smi)"}
    if expect is None:
        return {"status": "pass", "findings": [], "measurements": {"gpus": have},
                "reason": "no expected count given (--expect-gpus)"}
    if have == expect:
        return {"status": "pass", "findings": [], "measurements": {"gpus": have, "expected": expect}}
    return {"status": "fail", "measurements": {"gpus": have, "expected": expect}, "findings": [finding(
        "gpu-count", "critical", "%d GPU(s) answer, %d expected" % (have, expect),
        "find the missing GPU: `lspci -d 10de:` against `nvidia-smi -L`; `dmesg | grep -i xid`")]}


def _fabric_states(text):
    """{bus id: (state, status)} from `nvidia-smi -q`: the State and Status lines of each GPU's Fabric section."""
    states, bus, section, indent = {}, None, None, 0
    for line in text.splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if m:
            bus, section = m.group(1), None
            continue
        stripped = line.strip()
        lead = len(line) - len(line.lstrip())
        if bus and stripped == "Fabric":
            section, indent = "fabric", lead
            continue
        if section == "fabric":
            if lead <= indent:
                section = None
                continue
            key, _, value = stripped.partition(":")
            state, status = states.get(bus, (None, None))
            if key.strip() == "State":
                states[bus] = (value.strip(), status)
            elif key.strip() == "Status":
                states[bus] = (state, value.strip())
    return states


def check_fabric(ctx, timeout):
    """On an NVSwitch system every GPU's fabric state must be Completed (not just the fabric manager running)."""
    smi = tool("nvidia-smi", ctx)
    if not smi or not ctx.smi_ok:
        return {"status": "skip", "findings": [], "reason": "nvidia-smi did not answer"}
    rc, out, timed_out = run_tool([smi, "-q"], timeout)
    res = {"status": "pass", "findings": [], "command": "nvidia-smi -q", "rc": rc, "raw": {"nvidia-smi -q": out}}
    if timed_out:
        res["status"] = "timeout"
        return res
    states = _fabric_states(out)
    res["measurements"] = {"fabric": {b: {"state": s, "status": t} for b, (s, t) in states.items()}}
    if not ctx.nvswitches:
        res["reason"] = "no NVSwitch on the PCI bus: fabric state not applicable"
        return res
    res["findings"], reason = fabric_findings(ctx, states)
    if reason:
        res["reason"] = reason
    return res


def fabric_findings(ctx, states):
    """(findings, note) on an NVSwitch system: a GPU whose reported fabric state is not Completed is critical;
    N/A (e.g. A100: the driver reports no fabric state; the fabric manager's service is what verify-gpu checks)
    is noted, not failed."""
    unreported = [b for b, (state, _) in states.items() if (state or "N/A").upper() == "N/A"]
    found = []
    for bus, (state, status) in sorted(states.items()):
        if bus not in unreported and (state or "").lower() != "completed":
            gpu = ctx.gpu(bus_id=bus)
            found.append(finding(
                "fabric-not-completed", "critical", "%s: fabric state %r (status %r) on an NVSwitch system: CUDA "
                "cannot use its NVLinks until it is Completed" % (gpu_label(gpu), state, status),
                "`systemctl status nvidia-fabricmanager`, `journalctl -u nvidia-fabricmanager`; the fabric manager "
                "must be the driver's exact version", gpu=gpu, link="NVSwitch fabric"))
    return found, ("no fabric state reported for %d GPU(s)" % len(unreported) if unreported else None)


def check_persistence(ctx, timeout):
    """Persistence mode on for every GPU (the driver stays loaded between jobs)."""
    if not ctx.smi_ok:  # no GPU list to read the mode from: nothing was checked, so no pass
        return {"status": "skip", "findings": [], "reason": "nvidia-smi did not answer"}
    off = [g for g in ctx.gpus if g.get("persistence", "").lower() == "disabled"]
    return {"status": "pass", "findings": [finding(
        "persistence-off", "warning", "%s: persistence mode is Disabled" % gpu_label(g),
        "`systemctl enable --now nvidia-persistenced` (or `nvidia-smi -pm 1`)", gpu=g) for g in off]}


def _cuda_error_finding(what, err, gpu=None):
    remedy = {"CUDA_ERROR_NO_DEVICE": "the driver sees no CUDA device: `nvidia-smi`, `dmesg | grep -i nvrm`",
              "CUDA_ERROR_SYSTEM_NOT_READY": "on NVSwitch systems start nvidia-fabricmanager (fabric state must be "
                                             "Completed)",
              "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "libcuda and the kernel module differ: reinstall the driver, "
                                                   "reboot",
              "CUDA_ERROR_ECC_UNCORRECTABLE": "uncorrectable ECC error: drain, reset the GPU, RMA if it recurs",
              "CUDA_ERROR_STUB_LIBRARY": "a stub libcuda (from the toolkit) shadows the driver's: fix "
                                         "LD_LIBRARY_PATH / ldconfig"}.get(
        err["name"], "see `dmesg` for Xid errors around this time; reset the GPU or reboot, then rerun")
    return finding("cuda-" + what, "critical", "%s: %s returned %s" % (gpu_label(gpu) if gpu else "CUDA",
                                                                       err["call"], err["name"]), remedy, gpu=gpu)


def probe_findings(ctx, result):
    """Findings on a probe result: no library, init failure, a GPU whose context/kernel failed or is missing."""
    if "load_error" in result:
        return [finding("libcuda-missing", "critical", "cannot load %s: %s" % (result["library"], result["load_error"]),
                        "install the NVIDIA driver's user-space libraries (gpunode provision -i INVENTORY -l HOST "
                        "--playbook gpu-node); `ldconfig -p | grep libcuda` must list libcuda.so.1")]
    if "init_error" in result:
        return [_cuda_error_finding("init", result["init_error"])]
    found = []
    for dev in result.get("devices", []):
        gpu = ctx.gpu(bus_id=dev.get("bus_id")) if dev.get("bus_id") else ctx.gpu(index=dev.get("index"))
        gpu = dict(gpu or {}, **{k: dev[k] for k in ("uuid", "bus_id", "name") if dev.get(k)})
        if "error" in dev:
            found.append(_cuda_error_finding("failed", dev["error"], gpu))
        elif dev.get("kernel", {}).get("wrong"):
            found.append(finding("cuda-kernel-wrong", "critical", "%s: the probe kernel wrote %d wrong value(s)" % (
                gpu_label(gpu), dev["kernel"]["wrong"]), "drain; run `dcgmi diag -r 3` on this GPU", gpu=gpu))
    if ctx.gpus and len(result.get("devices", [])) < len(ctx.gpus):
        seen = {bus_key(d.get("bus_id")) for d in result["devices"]}
        for gpu in ctx.gpus:
            if bus_key(gpu["bus_id"]) not in seen:
                found.append(finding("cuda-device-missing", "critical", "%s: nvidia-smi lists it, CUDA does not" %
                                     gpu_label(gpu), "CUDA_VISIBLE_DEVICES? MIG mode? `nvidia-smi -q -i %s`"
                                     % gpu["index"], gpu=gpu))
    if "peer_error" in result:
        found.append(_cuda_error_finding("peer", result["peer_error"]))
    return found


def run_probe(ctx, mode, timeout, iterations=1):
    """The probe in a child process (this file with --probe), killed at the timeout."""
    here = os.path.abspath(__file__) if "__file__" in globals() else ""
    if not os.path.isfile(here):
        return probe(mode, iterations), None, False
    argv = [sys.executable, here, "--probe", mode, "--iterations", str(iterations)]
    if ctx.args.libcuda:
        argv += ["--libcuda", ctx.args.libcuda]
    rc, out, timed_out = run_tool(argv, timeout)
    if timed_out:
        return None, out, True
    try:
        return json.loads(out.strip().splitlines()[-1]), out, False
    except (ValueError, IndexError):
        return {"load_error": "the probe printed no result (exit %s): %s" % (rc, out.strip()[-300:]),
                "library": "libcuda.so.1"}, out, False


def check_cuda(ctx, timeout, mode="kernel", iterations=1):
    """A CUDA context and the PTX kernel on every GPU (gpunode's own probe, ctypes on libcuda.so.1)."""
    result, out, timed_out = run_probe(ctx, mode, timeout, iterations)
    if timed_out:
        return {"status": "timeout", "raw": {"probe": out}, "findings": [finding(
            "cuda-probe-hung", "critical", "the CUDA probe did not finish in %.0f s" % timeout,
            "a CUDA call hung: `dmesg | grep -i xid`; reset the GPUs or reboot")]}
    return {"status": "pass", "findings": probe_findings(ctx, result), "measurements": {"probe": result},
            "command": "accept --probe %s" % mode}


def check_bandwidth(ctx, timeout):
    """Host<->device bandwidth per GPU and GPU-to-GPU per pair: nvbandwidth when installed, else the probe."""
    nvb = tool("nvbandwidth", ctx)
    if nvb:
        argv = [nvb, "-t", "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_read_ce"]
        rc, out, timed_out = run_tool(argv, timeout)
        res = {"status": "timeout" if timed_out else "pass", "tool": "nvbandwidth", "command": " ".join(argv[1:]),
               "rc": rc, "raw": {"nvbandwidth": out}, "findings": []}
        if rc not in (0, None) and not timed_out:
            res["findings"].append(finding("nvbandwidth-failed", "critical", "nvbandwidth exited %s" % rc,
                                           "read its output (raw.nvbandwidth)", evidence=out[-1000:]))
        res["findings"] += peer_outliers(ctx, nvbandwidth_host_copies(out))
        return res
    res = check_cuda(ctx, timeout, "bandwidth", max(1, ctx.args.iterations))
    res["tool"] = "gpunode-probe"
    res["reason"] = NVBANDWIDTH_NOTE
    probe_result = res.get("measurements", {}).get("probe") or {}
    res["findings"] = res.get("findings", []) + peer_outliers(ctx, probe_result)
    return res


def nvbandwidth_host_copies(text):
    """{"devices": [{index, name, bus_id, h2d_gbs, d2h_gbs}]} from nvbandwidth's output: its Device lines and the
    one row of the host_to_device_memcpy_ce / device_to_host_memcpy_ce matrices (the layout
    gpunode/parsers/nvbandwidth.py reads, with its sources)."""
    devices = {}
    for m in re.finditer(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F]{8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?\s*$", text,
                         re.M):
        devices[int(m.group(1))] = {"index": int(m.group(1)), "name": m.group(2), "bus_id": m.group(3)}
    for test, key in (("host_to_device_memcpy_ce", "h2d_gbs"), ("device_to_host_memcpy_ce", "d2h_gbs")):
        section = text.split("Running %s." % test, 1)
        if len(section) < 2:
            continue
        lines = section[1].splitlines()
        header = next((i for i, ln in enumerate(lines) if ln.split() and all(t.isdigit() for t in ln.split())), None)
        if header is None or header + 1 >= len(lines):
            continue
        columns, row = lines[header].split(), lines[header + 1].split()
        if not row or row[0] != "0" or len(row) != len(columns) + 1:
            continue
        for column, value in zip(columns, row[1:]):
            if re.match(r"^\d+(\.\d+)?$", value):
                devices.setdefault(int(column), {"index": int(column)})[key] = float(value)
    return {"devices": [devices[i] for i in sorted(devices)]}


def peer_outliers(ctx, result, ratio=0.75):
    """A GPU whose host copy is below `ratio` of the median of the others (no reference needed on the node)."""
    found = []
    for key, what in (("h2d_gbs", "host-to-device"), ("d2h_gbs", "device-to-host")):
        values = [(d, d.get(key)) for d in result.get("devices", []) if d.get(key)]
        for dev, value in values:
            others = sorted(v for d, v in values if d is not dev)
            if not others:
                continue
            median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] +
                                                                      others[len(others) // 2]) / 2.0
            if median > 0 and value < ratio * median:
                gpu = ctx.gpu(bus_id=dev.get("bus_id")) or dev
                found.append(finding("bandwidth-low", "critical", "%s: %s %.1f GB/s is %.0f%% of the other GPUs' "
                                     "median %.1f GB/s" % (gpu_label(gpu), what, value, 100 * value / median, median),
                                     "`lspci -vv -s %s`: LnkSta against LnkCap (a link trained down)" %
                                     dev.get("bus_id"), gpu=gpu, link="PCIe"))
    return found


_DCGM_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")  # gpunode/parsers/dcgmi_json.py cites both


def _dcgm_root(text):
    """The result object of a `dcgmi diag -j` document in text (None when there is none)."""
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    return next((doc[k] for k in _DCGM_ROOTS if isinstance(doc, dict) and isinstance(doc.get(k), dict)), None)


def dcgm_statuses(text):
    """Every result's status, lower case ("pass", "skip", ...), of a `dcgmi diag -j` document in text."""
    root = _dcgm_root(text) or {}
    return [str((entry or {}).get("status", "")).lower() for category in root.get("test_categories") or []
            for test in (category or {}).get("tests") or [] for entry in (test or {}).get("results") or []]


def dcgm_json_findings(ctx, text):
    """Fail/Warn results of a `dcgmi diag -j` document, each naming its GPU (None: no document in text)."""
    root = _dcgm_root(text)
    if root is None:
        return None
    found = []
    for category in root.get("test_categories") or []:
        for test in (category or {}).get("tests") or []:
            for entry in (test or {}).get("results") or []:
                status = str(entry.get("status", "")).lower()
                if status not in ("fail", "warn", "warning"):
                    continue
                gid = entry.get("entity_id", entry.get("gpu_id", entry.get("gpu_ids")))
                gpu = ctx.gpu(index=gid) if gid is not None and str(gid).isdigit() else None
                warnings = [w.get("warning") or w.get("warnings") if isinstance(w, dict) else w
                            for w in entry.get("warnings") or []]
                found.append(finding(
                    "dcgm-diag-failed" if status == "fail" else "dcgm-diag-warning",
                    "critical" if status == "fail" else "warning",
                    "DCGM %s: %s on %s%s" % (test.get("name"), status.capitalize(), gpu_label(gpu) if gpu else
                                             "GPU %s" % gid if gid is not None else "the node",
                                             ": " + str(warnings[0]) if warnings and warnings[0] else ""),
                    "read the test's message; `dcgmi diag -r 3 -v` for details", gpu=gpu))
    return found


def check_dcgm(ctx, timeout, level):
    """`dcgmi diag -r LEVEL -j` where dcgmi is installed."""
    dcgmi = tool("dcgmi", ctx)
    if not dcgmi:
        return {"status": "not-installed", "findings": [], "reason": "dcgmi is not installed: " + DCGM_INSTALL}
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    rc, out, timed_out = run_tool(argv, timeout)
    res = {"status": "pass", "command": "dcgmi diag -r %d -j" % level, "rc": rc, "raw": {"dcgmi": out},
           "findings": []}
    if timed_out:
        res["status"] = "timeout"
        res["findings"].append(finding("dcgm-diag-hung", "critical", "dcgmi diag -r %d did not finish in %.0f s" % (
            level, timeout), "`systemctl status nvidia-dcgm`; a level that hangs on a healthy node needs a larger "
            "timeout in /etc/gpunode/accept.json (timeouts)"))
        return res
    found = dcgm_json_findings(ctx, out)
    if found is None:
        res["status"] = "error"
        res["reason"] = "dcgmi diag -r %d gave no result (exit %s): %s" % (
            level, rc, (out.strip().splitlines() or ["no output"])[-1][:200])
        return res
    res["findings"] = found
    statuses = dcgm_statuses(out)
    if statuses and all(st == "skip" for st in statuses):  # a run that tested nothing proves nothing
        res["status"] = "error"
        res["reason"] = ("dcgmi diag -r %d skipped all %d of its test results: nothing was tested; `dcgmi diag -r %d "
                         "-v` says why" % (
                             level, len(statuses), level))
    return res


def check_nccl(ctx, timeout):
    """NCCL all_reduce across the node's GPUs with nccl-tests' all_reduce_perf, where installed."""
    perf = tool("all_reduce_perf", ctx)
    if not perf:
        return {"status": "not-installed", "findings": [], "reason": "all_reduce_perf (nccl-tests) is not "
                "installed: NCCL not run; " + NCCL_TESTS_INSTALL}
    if len(ctx.gpus) < 2:
        return {"status": "skip", "findings": [], "reason": "one GPU: no collective to measure"}
    memory = min((g.get("memory_mib") or 0) for g in ctx.gpus)
    # Azure's health checks measure all_reduce at 16 GiB (gpunode/parsers/catalogs/nccl_references.yaml); a
    # GPU with less than 48 GiB cannot hold its in- and out-of-place buffers: 1 GiB there.
    top = "16G" if memory >= 48 * 1024 else "1G"
    argv = [perf, "-b", "8M", "-e", top, "-f", "2", "-g", str(len(ctx.gpus))]
    rc, out, timed_out = run_tool(argv, timeout)
    res = {"status": "timeout" if timed_out else "pass", "command": " ".join(["all_reduce_perf"] + argv[1:]),
           "rc": rc, "raw": {"nccl-tests": out}, "findings": []}
    avg = re.search(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", out)
    oob = re.search(r"#\s*Out of bounds values\s*:\s*(\d+)", out)
    res["measurements"] = {"avg_busbw_gbs": float(avg.group(1)) if avg else None}
    if timed_out:
        res["findings"].append(finding("nccl-hung", "critical", "all_reduce_perf did not finish in %.0f s" % timeout,
                                       "NCCL hangs point at NVLink/P2P: `nvidia-smi topo -m`, NCCL_DEBUG=INFO"))
    elif (oob and int(oob.group(1))) or rc != 0:
        res["findings"].append(finding("nccl-failed", "critical", "all_reduce_perf: %s" % (
            "%s out-of-bounds value(s)" % oob.group(1) if oob and int(oob.group(1)) else "exit %s" % rc),
            "rerun with NCCL_DEBUG=INFO; run dcgmi diag -r 3", evidence=out[-1000:]))
    return res


# name, estimated seconds, hard timeout, function. Estimates: DCGM's own documentation of its levels ("seconds",
# "approximately two minutes", "approximately 15 minutes", level 4 longer:
# https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html), gpunode's
# measurements for the rest.
def _checks(tier):
    """(name, estimated s, timeout s, function, the tool it needs: no estimate when that tool is absent)."""
    quick = [("nvidia-smi", 2, 30, check_nvidia_smi, None), ("gpu-count", 0, 1, check_gpu_count, None),
             ("fabric", 2, 30, check_fabric, None), ("persistence", 0, 1, check_persistence, None),
             ("cuda", 8, 60, check_cuda, None), ("dcgm-diag-1", 30, 120, lambda c, t: check_dcgm(c, t, 1), "dcgmi")]
    standard = [("dcgm-diag-2", 150, 600, lambda c, t: check_dcgm(c, t, 2), "dcgmi"),
                ("bandwidth", 60, 600, check_bandwidth, None), ("nccl", 120, 900, check_nccl, "all_reduce_perf")]
    burn = [("cuda-loop", 60, 600, lambda c, t: check_cuda(c, t, "kernel", 200), None),
            ("dcgm-diag-3", 1200, 3600, lambda c, t: check_dcgm(c, t, 3), "dcgmi"),
            ("dcgm-diag-4", 3600, 7200, lambda c, t: check_dcgm(c, t, 4), "dcgmi")]
    return quick + (standard if tier != "quick" else []) + (burn if tier == "burn-in" else [])


def _verdict(res):
    if res["status"] in ("timeout", "budget", "not-installed", "skip", "error"):
        return res["status"]
    severities = {f["severity"] for f in res["findings"]}
    return "fail" if "critical" in severities else "warn" if "warning" in severities else "pass"


def run_tier(ctx):
    """Every check of the tier in order under the budget; the result document."""
    args = ctx.args
    budget = args.budget
    started = time.monotonic()
    estimates = ctx.config.get("estimates") if isinstance(ctx.config.get("estimates"), dict) else {}
    timeouts = ctx.config.get("timeouts") if isinstance(ctx.config.get("timeouts"), dict) else {}
    checks, stopped = [], None
    for name, estimate, limit, fn, needs in _checks(args.tier):
        estimate, limit = float(estimates.get(name, estimate)), float(timeouts.get(name, limit))
        if needs and not tool(needs, ctx):
            estimate = 0.0  # it only says "not installed"
        left = budget - (time.monotonic() - started) - RESERVE_S
        if stopped or estimate > left:
            stopped = stopped or name
            kept = ("; %g s of it kept for the runner itself" % RESERVE_S
                    if budget <= RESERVE_S or left + RESERVE_S >= estimate else "")
            checks.append({"name": name, "status": "budget", "seconds": 0.0, "estimate_s": estimate,
                           "timeout_s": limit, "findings": [], "reason": (
                               "not run: the budget stopped the tier at %s (needs ~%.0f s, %.1f s of the %g s "
                               "budget left%s)" % (stopped, estimate, math.floor(max(left, 0) * 10) / 10, budget, kept))
                           if name == stopped else "not run: the budget stopped the tier at %s" % stopped})
            continue
        t0 = time.monotonic()
        try:
            res = fn(ctx, min(limit, max(left, 0.1)))
        except Exception as exc:  # a check's own bug: that check could not judge, the tier goes on
            res = {"status": "error", "findings": [], "reason": "check failed: %r" % (exc,)}
        res.setdefault("findings", [])
        res.update(name=name, seconds=round(time.monotonic() - t0, 3), estimate_s=estimate,
                   timeout_s=round(min(limit, max(left, 0.1)), 1))
        res["status"] = _verdict(res)
        checks.append(res)
    return document(ctx, checks, stopped, time.monotonic() - started)


def document(ctx, checks, stopped, elapsed):
    statuses = [c["status"] for c in checks]
    if any(s in ("fail", "timeout") for s in statuses):
        verdict, code = "fail", EXIT_FAIL
    elif any(s in ("budget", "error") for s in statuses):
        verdict, code = "unknown", EXIT_UNKNOWN
    else:
        verdict, code = "pass", EXIT_PASS
    return {"kind": "gpunode-accept", "version": VERSION, "host": socket.gethostname(), "tier": ctx.args.tier,
            "budget_s": ctx.args.budget, "elapsed_s": round(elapsed, 3), "verdict": verdict, "exit_code": code,
            "expect_gpus": ctx.args.expect_gpus, "expect_model": ctx.args.expect_model, "gpus": ctx.gpus,
            "checks": checks, "stopped_by_budget": stopped,
            "not_run": [{"name": c["name"], "reason": c.get("reason", "")} for c in checks
                        if c["status"] in ("budget", "not-installed", "skip")]}


# ---------------------------------------------------------------- output forms

def first_problem(doc):
    """(check, finding or None) of the first failing check; else of the first check that could not judge."""
    for wanted in (("fail", "timeout"), ("budget", "error")):
        for check in doc["checks"]:
            if check["status"] in wanted:
                crit = [f for f in check["findings"] if f["severity"] == "critical"]
                return check, (crit[0] if crit else None)
    return None, None


def _one_line(text):
    return re.sub(r"\s+", " ", text).strip()


def problem_text(doc):
    """The first problem in words: "gpunode accept quick: cuda: GPU 3 (...): cuInit returned ..."."""
    check, found = first_problem(doc)
    if check is None:
        return None
    what = found["summary"] if found else check.get("reason") or check["status"]
    return _one_line("%s: %s" % (check["name"], what))


def render_slurm(doc):
    """One line for `scontrol update NodeName=... State=DRAIN Reason=...`: the first failing finding; no quotes."""
    text = problem_text(doc)
    if text is None:
        return "gpunode accept %s: pass (%d checks, %.1f s)" % (doc["tier"], len(doc["checks"]), doc["elapsed_s"])
    return ("gpunode %s %s" % (doc["tier"], text)).replace('"', "'")[:SLURM_REASON_MAX]


def render_npd(doc):
    """node-problem-detector's custom plugin message: one line, at most 80 characters (NPD cuts it there)."""
    text = problem_text(doc)
    line = "GPU node OK: %s tier, %d GPU(s)" % (doc["tier"], len(doc["gpus"])) if text is None else text
    return line[:NPD_MAX_OUTPUT]


def render_text(doc):
    lines = ["gpunode accept %s on %s: %s (%.1f s of a %.0f s budget)" % (
        doc["tier"], doc["host"], doc["verdict"].upper(), doc["elapsed_s"], doc["budget_s"])]
    for check in doc["checks"]:
        lines.append("  %-12s %-13s %6.2f s%s" % (check["name"], check["status"], check["seconds"],
                                                   "  " + check["reason"] if check.get("reason") else ""))
        for f in check["findings"]:
            lines.append("      %s %s: %s" % (f["severity"], f["id"], f["summary"]))
            if f.get("remedy") and f["severity"] != "ok":
                lines.append("        fix: %s" % f["remedy"])
    return "\n".join(lines)


def load_config(path):
    """The config file's settings ({} when it does not exist); raises ValueError with the fix when unreadable."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError("cannot read %s: %s; fix its JSON or remove it" % (path, exc)) from None
    if not isinstance(data, dict):
        raise ValueError("%s must hold a JSON object like {\"tier\": \"quick\", \"expect_gpus\": 8}" % path)
    return data


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="accept", description="gpunode acceptance tiers on this node")
    parser.add_argument("--tier", choices=TIERS)
    parser.add_argument("--budget", type=float, help="seconds the tier may take (default: quick 60, standard "
                        "1200, burn-in 10800)")
    parser.add_argument("--expect-gpus", type=int)
    parser.add_argument("--expect-model")
    parser.add_argument("--format", choices=("json", "text", "slurm", "npd"), default="json")
    parser.add_argument("--config", default=CONFIG_PATH)
    parser.add_argument("--iterations", type=int, default=1, help="probe kernel runs per GPU")
    parser.add_argument("--libcuda", help="the driver library to load (default libcuda.so.1)")
    parser.add_argument("--probe", choices=("kernel", "bandwidth"), help=argparse.SUPPRESS)
    parser.add_argument("--check-ptx", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.probe:
        print(json.dumps(probe(args.probe, max(1, args.iterations), library=args.libcuda or "libcuda.so.1")))
        return 0
    if args.check_ptx:
        problems = ptx_problems()
        print("\n".join(problems) or "PTX ok")
        return 1 if problems else 0
    try:
        config = load_config(args.config)
        args.tier = args.tier or config.get("tier") or "quick"
        if args.tier not in TIERS:
            raise ValueError("tier %r in %s is not one of %s" % (args.tier, args.config, ", ".join(TIERS)))
        args.budget = float(args.budget if args.budget is not None else config.get("budget",
                                                                                  DEFAULT_BUDGET[args.tier]))
        if args.expect_gpus is None and config.get("expect_gpus") is not None:
            args.expect_gpus = int(config["expect_gpus"])
        args.expect_model = args.expect_model or config.get("expect_model")
        if args.budget <= 0:
            raise ValueError("the budget must be more than 0 seconds, e.g. --budget 60")
    except (TypeError, ValueError) as exc:
        sys.stderr.write("accept: %s\n" % exc)
        return EXIT_UNKNOWN
    doc = run_tier(Context(args, config))
    render = {"json": lambda d: json.dumps(d, indent=1), "text": render_text, "slurm": render_slurm,
              "npd": render_npd}[args.format]
    sys.stdout.write(render(doc) + "\n")
    return doc["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
