"""analyze(): each check on real captures (edited where a fault has to be injected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.verify import (
    ContainerTest,
    Evidence,
    Expectations,
    FabricManagerState,
    Finding,
    analyze,
    is_healthy,
    parse_lspci,
    parse_smi_table,
    parse_smi_text,
    parse_smi_xml,
)

FIXTURES = Path(__file__).resolve().parent / "data" / "nvidia"
COULDNT_COMMUNICATE = (
    "errors/nvidia-smi__couldnt-communicate__GoogleCloudPlatform-compute-gpu-installation-33.txt")
H200_LSPCI = "lspci/lspci-nn__H200-SXM-x8__easydiffusion-torchruntime-24.txt"
A10_TABLE = "table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt"
# NVSwitch lines as lspci prints them on an HGX/DGX board (class 0680, vendor 10de).
NVSWITCH_LINES = "".join(f"{bus}:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)\n"
                         for bus in ("05", "06", "07", "08"))


def read(rel: str) -> str:
    path = FIXTURES / rel
    if not path.is_file():
        pytest.fail(f"capture {path} is missing from tests/data (restore it from git)")
    return path.read_text(encoding="utf-8")


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    ids = [f.id for f in findings]
    assert len(ids) == len(set(ids)), f"duplicate finding ids: {ids}"
    return {f.id: f for f in findings}


def test_healthy_capture_has_no_findings():
    smi = parse_smi_text(read("text_q/gpud-e2e__NormalQueryOutput.A10.550.127.05.txt"))
    findings = analyze(Evidence(smi=smi,
                                pci_devices=parse_lspci(read("lspci/gpud__lspci.nn.a10"))))
    assert findings == []
    assert is_healthy(findings)


def test_pci_gpus_but_nvidia_smi_error_is_driver_not_loaded():
    findings = by_id(analyze(Evidence(smi_error=read(COULDNT_COMMUNICATE),
                                      pci_devices=parse_lspci(read("lspci/gpud__lspci.nn.a10")))))
    finding = findings["driver-not-loaded"]
    assert finding.severity == "critical"
    assert "couldn't communicate with the NVIDIA driver" in finding.evidence
    assert "PCI shows 1 NVIDIA GPU(s) at 06:00.0" in finding.evidence
    assert "dkms" in finding.remedy.lower() and "modprobe nvidia" in finding.remedy
    assert not is_healthy(list(findings.values()))


def test_no_pci_gpu_is_no_nvidia_gpu():
    """The A10 VM's lspci without its GPU line is a real non-GPU QEMU host listing."""
    lines = read("lspci/gpud__lspci.nn.a10").splitlines()
    lspci = "".join(line + "\n" for line in lines if "[10de:" not in line)
    findings = by_id(analyze(Evidence(pci_devices=parse_lspci(lspci), smi_error=read(COULDNT_COMMUNICATE))))
    assert findings["no-nvidia-gpu"].severity == "critical"
    assert "expected without a GPU" in findings["no-nvidia-gpu"].evidence
    assert "driver-not-loaded" not in findings  # explained by the missing GPU


def test_gpu_count_mismatch_between_pci_and_nvidia_smi():
    smi = parse_smi_table(read("table/thamada-gls__H100SXMx8__nvidia-smi.txt"))
    smi.gpus = smi.gpus[:7]  # one GPU no longer initialised by the driver
    findings = by_id(analyze(Evidence(smi=smi, pci_devices=parse_lspci(read(H200_LSPCI)))))
    finding = findings["gpu-count-mismatch"]
    assert finding.severity == "critical"
    assert finding.summary == "8 NVIDIA GPU(s) on PCI but nvidia-smi reports 7"


def test_expectations_mismatch():
    smi = parse_smi_table(read(A10_TABLE))
    expect = Expectations(expect_gpus=8, expect_model="H100", min_driver="560.35.03")
    findings = by_id(analyze(Evidence(smi=smi, expectations=expect)))
    assert findings["gpu-count-expected"].severity == "critical"
    assert findings["gpu-count-expected"].summary == "expected 8 GPU(s), found 1"
    assert "'NVIDIA A10'" in findings["gpu-model-expected"].evidence
    assert findings["driver-version-too-old"].summary == \
        "driver 550.127.05 is older than the required 560.35.03"
    ok = analyze(Evidence(smi=smi, expectations=Expectations(1, "a10", "550.90.07")))
    assert not {"gpu-count-expected", "gpu-model-expected", "driver-version-too-old"} & {f.id for f in ok}


def test_model_expectation_falls_back_to_pci_names():
    findings = by_id(analyze(Evidence(pci_devices=parse_lspci(read(H200_LSPCI)),
                                      expectations=Expectations(expect_gpus=8, expect_model="H100"))))
    assert "gpu-count-expected" not in findings
    assert "GH100 [H200 SXM 141GB]" in findings["gpu-model-expected"].evidence


def test_nvswitch_without_fabric_manager():
    pci = parse_lspci(read(H200_LSPCI) + NVSWITCH_LINES)
    smi = parse_smi_table(read("table/thamada-gls__H100SXMx8__nvidia-smi.txt"))
    findings = by_id(analyze(Evidence(smi=smi, pci_devices=pci,
                                      fabricmanager=FabricManagerState(active=False, version="565.57.01"))))
    finding = findings["fabricmanager-missing"]
    assert finding.severity == "critical"
    assert "4 NVSwitch(es)" in finding.evidence and "not active" in finding.evidence
    assert "fabricmanager-version-mismatch" not in findings  # 565.57.01 == driver

    mismatch = by_id(analyze(Evidence(smi=smi, pci_devices=pci,
                                      fabricmanager=FabricManagerState(active=True, version="565.57.02"))))
    assert "fabricmanager-missing" not in mismatch
    assert mismatch["fabricmanager-version-mismatch"].summary == \
        "fabric manager 565.57.02 does not match driver 565.57.01"
    no_switch = analyze(Evidence(smi=smi, pci_devices=parse_lspci(read(H200_LSPCI)),
                                 fabricmanager=FabricManagerState(active=False)))
    assert "fabricmanager-missing" not in {f.id for f in no_switch}


def test_dkms_built_for_another_kernel_names_both_kernels():
    status = ["nvidia/550.127.05, 6.8.0-45-generic, x86_64: installed"]
    findings = by_id(analyze(Evidence(smi_error=read(COULDNT_COMMUNICATE), dkms_status=status,
                                      running_kernel="6.8.0-47-generic")))
    finding = findings["dkms-built-other-kernel"]
    assert finding.severity == "critical"
    assert "6.8.0-45-generic" in finding.summary and "6.8.0-47-generic" in finding.summary
    assert "linux-headers-6.8.0-47-generic" in finding.remedy
    assert "dkms-not-built" not in findings


def test_dkms_states():
    smi_error = read(COULDNT_COMMUNICATE)
    ok = analyze(Evidence(dkms_status=["nvidia, 470.82.01, 5.4.0-90-generic, x86_64: installed"],
                          running_kernel="5.4.0-90-generic"))
    assert not [f for f in ok if f.id.startswith("dkms")]
    added = by_id(analyze(Evidence(smi_error=smi_error, dkms_status=["nvidia/550.54.14: added"],
                                   running_kernel="6.8.0-47-generic")))
    assert added["dkms-not-built"].severity == "critical" and "added" in added["dkms-not-built"].evidence
    precompiled = analyze(Evidence(smi=parse_smi_table(read(A10_TABLE)), dkms_status=[],
                                   running_kernel="6.8.0-47-generic"))
    assert not [f for f in precompiled if f.id.startswith("dkms")]  # driver works without DKMS


def test_nouveau_loaded():
    broken = by_id(analyze(Evidence(smi_error=read(COULDNT_COMMUNICATE), nouveau_loaded=True)))
    assert broken["nouveau-loaded"].severity == "critical"
    assert "blacklist nouveau" in broken["nouveau-loaded"].remedy
    working = by_id(analyze(Evidence(smi=parse_smi_table(read(A10_TABLE)), nouveau_loaded=True)))
    assert working["nouveau-loaded"].severity == "warning"


def test_mig_counted_and_pending_reset():
    text = read("xml/telegraf__a100-sxm4-v12.xml")
    assert "mig-pending-reset" not in {f.id for f in analyze(Evidence(smi=parse_smi_xml(text)))}
    pending = text.replace("<pending_mig>Enabled</pending_mig>", "<pending_mig>Disabled</pending_mig>")
    finding = by_id(analyze(Evidence(smi=parse_smi_xml(pending))))["mig-pending-reset"]
    assert finding.severity == "warning" and "current Enabled, pending Disabled" in finding.evidence
    assert finding.gpu == "00000000:01:00.0"


def test_ecc_unsupported_gives_no_ecc_finding():
    smi = parse_smi_xml(read("xml/microsoft-pai__nvidia_smi_sample_ecc_unsupported.xml"))
    findings = analyze(Evidence(smi=smi))
    assert [f.id for f in findings] == ["persistence-mode-off"]  # and no ECC / PCIe finding (idle gen 1 of 3)


def test_ecc_remap_and_retirement_faults():
    a10g = read("xml/telegraf__a10g.xml")
    volatile_dbe = a10g.replace("<dram_uncorrectable>0</dram_uncorrectable>",
                                "<dram_uncorrectable>2</dram_uncorrectable>", 1)  # first = volatile
    ecc = by_id(analyze(Evidence(smi=parse_smi_xml(volatile_dbe))))["ecc-uncorrectable"]
    assert ecc.severity == "critical" and "2 uncorrectable ECC error(s)" in ecc.evidence

    remap = a10g.replace("<remapped_row_pending>No", "<remapped_row_pending>Yes").replace(
        "<remapped_row_failure>No", "<remapped_row_failure>Yes")
    findings = by_id(analyze(Evidence(smi=parse_smi_xml(remap))))
    assert findings["row-remap-pending"].severity == "warning"
    assert findings["row-remap-failure"].severity == "critical"

    t4 = read("xml/telegraf__tesla-t4.xml").replace("<pending_retirement>No", "<pending_retirement>Yes")
    assert by_id(analyze(Evidence(smi=parse_smi_xml(t4))))["retired-pages-pending"].severity == "warning"


def test_pcie_width_reduced_but_idle_gen_drop_ignored():
    t4 = by_id(analyze(Evidence(smi=parse_smi_xml(read("xml/telegraf__tesla-t4.xml")))))["pcie-degraded"]
    assert t4.severity == "warning" and "link width x8 of max x16" in t4.evidence
    a5000 = analyze(Evidence(smi=parse_smi_xml(read("xml/telegraf__dual_a5000-v13.xml"))))
    assert "pcie-degraded" not in {f.id for f in a5000}  # gen 1 of 4 at P8: power saving

    busy = parse_smi_xml(read("xml/telegraf__dual_a5000-v13.xml"))
    busy.gpus[0].performance_state, busy.gpus[0].utilization_gpu_pct = "P0", 97
    finding = by_id(analyze(Evidence(smi=busy)))["pcie-degraded"]
    assert "link gen 1 of max 4 while busy" in finding.evidence and finding.gpu == "00000000:81:00.0"


def test_hw_slowdown_active_on_h100():
    smi = parse_smi_text(read("text_q/gpud__nvidia-smi-query.535.161.08.out.0.valid"))
    finding = by_id(analyze(Evidence(smi=smi)))["throttle-hw"]
    assert finding.severity == "warning" and finding.summary.endswith("on 8 GPU(s)")
    assert "hw_slowdown, hw_power_brake_slowdown" in finding.evidence and "PSU" in finding.remedy


def test_unknown_error_values_and_inforom():
    t4 = read("xml/telegraf__tesla-t4.xml").replace("<fan_speed>N/A</fan_speed>",
                                                    "<fan_speed>Unknown Error</fan_speed>")
    finding = by_id(analyze(Evidence(smi=parse_smi_xml(t4))))["nvml-unknown-error"]
    assert finding.severity == "warning" and "fan_speed" in finding.evidence
    table = read(A10_TABLE) + "WARNING: infoROM is corrupted at gpu 0000:06:00.0\n"
    assert by_id(analyze(Evidence(smi=parse_smi_table(table))))["inforom-corrupted"].gpu == "00000000:06:00.0"


def test_xids_one_finding_per_code():
    findings = by_id(analyze(Evidence(kernel_log=read("dmesg/gpud__dmesg.decode.iso.log.0"))))
    assert set(findings) == {"xid-13", "xid-43"}
    assert findings["xid-13"].summary == "Xid 13 (Graphics Engine Exception): 629 event(s) on 1 GPU(s)"
    assert findings["xid-13"].gpu == "0000:38:00" and findings["xid-13"].severity == "warning"
    assert "out-of-bounds" in findings["xid-13"].evidence  # meaning from NVIDIA's catalog
    gsp = by_id(analyze(Evidence(kernel_log=read("dmesg/gpud__dmesg-with-xid-119.log"))))["xid-119"]
    assert gsp.severity == "critical" and "RESET_GPU" in gsp.remedy


def test_xid_79_is_reported_as_gpu_lost():
    log = "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n"
    findings = by_id(analyze(Evidence(kernel_log=log)))
    assert set(findings) == {"gpu-lost"} and findings["gpu-lost"].gpu == "0000:03:00"


def test_container_test_output():
    output = read("errors/docker__could-not-select-device-driver__NVIDIA-nvidia-docker-1352.txt")
    findings = by_id(analyze(Evidence(container_test=ContainerTest(output, 125))))
    assert findings["container-runtime-missing"].severity == "critical"
    assert "exit code 125" in findings["container-runtime-missing"].evidence
    failed = by_id(analyze(Evidence(container_test=ContainerTest("exec format error\n", 1))))
    assert "container-gpu-test-failed" in failed
    assert analyze(Evidence(container_test=ContainerTest("GPU 0: NVIDIA A10 (UUID: GPU-x)\n", 0))) == []


def test_truncated_output_is_flagged():
    smi = parse_smi_text(read("text_q/gpud__nvidia-smi-query.535.183.01.out.0.invalid"))
    finding = by_id(analyze(Evidence(smi=smi)))["smi-output-incomplete"]
    assert finding.severity == "warning" and "Invalid HW Slowdown" in finding.evidence


def test_critical_findings_come_first_and_decide_health():
    findings = analyze(Evidence(smi=parse_smi_xml(read("xml/telegraf__tesla-t4.xml")),
                                kernel_log=read("dmesg/gpud__dmesg-with-xid-119.log")))
    severities = [f.severity for f in findings]
    assert severities == sorted(severities, key=["critical", "warning", "ok"].index)
    assert not is_healthy(findings)
    assert is_healthy([f for f in findings if f.severity != "critical"])


def test_model_match_is_whole_token():
    a10g = parse_smi_xml(read("xml/telegraf__a10g.xml"))
    assert "gpu-model-expected" in {f.id for f in analyze(Evidence(smi=a10g, expectations=Expectations(
        expect_model="A10")))}
    assert "gpu-model-expected" not in {f.id for f in analyze(Evidence(smi=a10g, expectations=Expectations(
        expect_model="a10g")))}


@pytest.mark.parametrize(("kernel", "packages", "modinfo"), [
    # Ubuntu precompiled (nvidia_driver method distro): Canonical's signed modules package, no DKMS entry
    ("6.8.0-1021-aws", {"linux-modules-nvidia-535-server-6.8.0-1021-aws": "6.8.0-1021.23",
                        "nvidia-headless-no-dkms-535-server": "535.230.02-0ubuntu0.24.04.3"},
     "/lib/modules/6.8.0-1021-aws/kernel/nvidia-535-srv/nvidia.ko\n"),
    # EL precompiled stream: NVIDIA's kmod for the running kernel (rpm NAME), its module under extra/
    ("5.14.0-570.12.1.el9_6.x86_64", {"kmod-nvidia-570.133.20-5.14.0-570.12.1": "3:570.133.20-1.el9",
                                      "nvidia-driver": "3:570.133.20-1.el9"},
     "/lib/modules/5.14.0-570.12.1.el9_6.x86_64/extra/drivers/video/nvidia/nvidia.ko.xz\n"),
    # only the module file is known (a package of another name): modinfo's answer is enough
    ("6.8.0-1021-aws", {"nvidia-utils-535-server": "535.230.02-0ubuntu0.24.04.3"},
     "/lib/modules/6.8.0-1021-aws/kernel/nvidia-535-srv/nvidia.ko\n"),
])
def test_precompiled_modules_are_not_an_unbuilt_dkms_module(kernel, packages, modinfo):
    """A host whose NVIDIA modules came precompiled has no `dkms status` entry: with nvidia-smi failing (not loaded
    yet, a GPU fault) it was reported `dkms-not-built` critical. The modules package or the module file of the
    running kernel (gpu_evidence.sh's `modules` section) says the module is there."""
    from gpunode.facts import Facts
    from gpunode.facts.model import KernelInfo, NvidiaInfo
    from gpunode.verify.host_evidence import evidence_from

    facts = Facts(kernel=KernelInfo(running=kernel), nvidia=NvidiaInfo(packages=packages))
    smi = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n@@exit 9\n"
    sections = {"nvidia-smi": smi, "kernel-log": "", "headers": "installed\n", "modules": modinfo}
    findings = by_id(analyze(evidence_from(facts, sections, Expectations())))
    assert "dkms-not-built" not in findings, findings.get("dkms-not-built")
    absent = by_id(analyze(evidence_from(facts, {**sections, "modules": ""}, Expectations())))
    assert ("dkms-not-built" in absent) == (not any(p.startswith(("linux-modules", "kmod")) for p in packages))


def test_the_kernel_that_boots_next_without_its_module_is_a_warning():
    """Issue 37: an unattended upgrade installed a newer kernel (the one the bootloader boots next) without the NVIDIA
    module; the running kernel's module is fine, so only the next boot is at stake."""
    running, newer = "6.1.0-27-cloud-amd64", "6.1.0-28-cloud-amd64"
    built = [f"nvidia-current/535.216.01, {running}, x86_64: installed"]
    smi = parse_smi_table(read(A10_TABLE))

    def findings(status: list[str], following: str, headers: bool) -> dict:
        return by_id(analyze(Evidence(smi=smi, dkms_status=status, running_kernel=running,
                                      next_boot_kernel=following, next_boot_headers=headers)))

    missing = findings(built, newer, False)["dkms-next-boot-kernel"]
    assert missing.severity == "warning" and newer in missing.summary and "next reboot" in missing.summary
    assert f"linux-headers-{newer}" in missing.remedy and f"dkms autoinstall -k {newer}" in missing.remedy
    assert f"no headers installed for {newer}" in missing.evidence and built[0] in missing.evidence
    with_headers = findings(built, newer, True)["dkms-next-boot-kernel"]
    assert "linux-headers" not in with_headers.remedy
    cut_short = [*built, f"nvidia-current/535.216.01, {newer}, x86_64: installed (Differences between built and "
                 "installed modules)"]
    assert "dkms-next-boot-kernel" in findings(cut_short, newer, True)
    assert "dkms-next-boot-kernel" not in findings([*built, f"nvidia-current/535.216.01, {newer}, x86_64: installed"],
                                                   newer, True)
    assert "dkms-next-boot-kernel" not in findings(built, running, True)  # the running kernel boots next
    assert "dkms-next-boot-kernel" not in findings([], newer, False)  # precompiled modules: DKMS not used
