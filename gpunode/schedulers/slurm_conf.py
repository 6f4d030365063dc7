"""slurm.conf lines gpunode writes: a small cluster's whole file (the lab) and the HealthCheckProgram lines.

Every key is Slurm 22.05's (Debian 12 packages 22.05.8), from its man page slurm.conf(5):
SchedMD/slurm@d525b6872a106d32916b33a8738f12510ec7cf04 (tag slurm-22-05-8-1) doc/man/man5/slurm.conf.5, at the
line named beside each key in the fact table SLURM_CONF_KEYS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode.vendor_facts import Fact, Pin, fact_table

SLURM = Pin("SchedMD/slurm", "d525b6872a106d32916b33a8738f12510ec7cf04")  # tag slurm-22-05-8-1
_MAN = "doc/man/man5/slurm.conf.5"
_KEY_LINES = {
    "ClusterName": "642", "SlurmctldHost": "4562", "AuthType": "497", "SlurmUser": "5087",
    "StateSaveLocation": "5152", "SlurmdSpoolDir": "4962", "SlurmctldPidFile": "4700", "SlurmdPidFile": "4935",
    "SlurmctldLogFile": "4577", "SlurmdLogFile": "4884", "ProctrackType": "2998", "TaskPlugin": "5353",
    "MpiDefault": "2273", "ReturnToService": "3436", "JobAcctGatherType": "1501", "AccountingStorageType": "205",
    "JobCompType": "1665", "JobCompLoc": "1634", "HealthCheckProgram": "1452", "HealthCheckInterval": "1410",
    "HealthCheckNodeState": "1416", "NodeName": "5782", "NodeAddr": "5825", "CPUs": "5894", "State": "6037",
    "PartitionName": "6761", "Nodes": "6638", "Default": "6452", "MaxTime": "6620",
}
# Every slurm.conf key gpunode writes, with the line of its `.TP` heading in slurm.conf(5) at that commit.
SLURM_CONF_KEYS = fact_table("slurm-conf", {
    key: Fact(key, SLURM.at(_MAN, line), "slurm.conf(5) entry of the key") for key, line in _KEY_LINES.items()
} | {
    "CgroupPlugin": Fact("CgroupPlugin", SLURM.at("doc/man/man5/cgroup.conf.5", "43"), "cgroup.conf(5): v1, v2 "
                         "or autodetect (the default)"),
})

# Where gpunode installs its HealthCheckProgram (scripts/slurm_healthcheck.sh) on a node.
HEALTHCHECK_PATH = "/usr/local/libexec/gpunode/slurm-healthcheck"
# The states to run it in: the man page's default is ANY (line 1416); the quick tier takes the GPUs for up to a
# minute, so not under a running job: IDLE only (line 1437). A node gpunode drained is IDLE+DRAIN and still runs
# it (the pass that resumes it): slurmctld tests the base state only, src/slurmctld/ping_nodes.c:479-482 with
# IS_NODE_IDLE at src/common/slurm_protocol_defs.h:126-127 (same commit).
HEALTHCHECK_NODE_STATE = "IDLE"
# slurmd kills the program after 60 s (line 1465; src/slurmd/slurmd/slurmd.c:2870 max_wait = 60 * 1000): the quick
# tier's budget must fit under it.
HEALTHCHECK_KILL_AFTER_S = 60


def healthcheck_lines(interval_s: int = 300, program: str = HEALTHCHECK_PATH,
                      node_state: str = HEALTHCHECK_NODE_STATE) -> list[str]:
    """The slurm.conf lines that make slurmd run gpunode's health check every `interval_s` seconds (and once at
    slurmd start, before it registers: man page line 1468; src/slurmd/slurmd/slurmd.c:395)."""
    if interval_s <= 0:
        raise ValueError("HealthCheckInterval must be positive: 0 disables the program (slurm.conf(5) line 1412)")
    return [f"HealthCheckProgram={program}", f"HealthCheckInterval={interval_s}",
            f"HealthCheckNodeState={node_state}"]


@dataclass
class ClusterConf:
    """A small cluster: one controller, compute nodes by (name, address), one partition holding them all."""

    cluster: str
    controller: tuple[str, str]                       # (hostname, address)
    nodes: list[tuple[str, str]]                      # (NodeName, NodeAddr)
    cpus: int = 1                                     # per node: one job at a time per node with the default
    partition: str = "gpu"
    healthcheck: list[str] = field(default_factory=list)  # healthcheck_lines(...) or none
    jobcomp_path: str = "/var/log/slurm/jobcomp.log"

    def render(self) -> str:
        """The whole slurm.conf. Accounting without a database: slurmctld writes each finished job to a text file
        (jobcomp/filetxt), which `sacct --completion` reads (sacct 22.05 refuses to run with
        accounting_storage/none otherwise: src/sacct/options.c:1043-1048 at the same commit; `-c` reads
        JobCompLoc through slurmdb_jobcomp_init, lines 1031-1037)."""
        name, address = self.controller
        lines = [
            "# Written by gpunode; keys from Slurm 22.05's slurm.conf(5).",
            f"ClusterName={self.cluster}",
            f"SlurmctldHost={name}({address})",
            "AuthType=auth/munge",
            "SlurmUser=slurm",
            "StateSaveLocation=/var/lib/slurm/slurmctld",
            "SlurmdSpoolDir=/var/lib/slurm/slurmd",
            "SlurmctldPidFile=/run/slurmctld.pid",
            "SlurmdPidFile=/run/slurmd.pid",
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
            "SlurmdLogFile=/var/log/slurm/slurmd.log",
            # No cgroup plugins: lab hosts (and some containers) do not delegate cgroup controllers to slurmd.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/linux",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp_path}",
            *self.healthcheck,
            *(f"NodeName={node} NodeAddr={addr} CPUs={self.cpus} State=UNKNOWN" for node, addr in self.nodes),
            f"PartitionName={self.partition} Nodes={','.join(n for n, _ in self.nodes)} Default=YES "
            "MaxTime=INFINITE State=UP",
        ]
        return "\n".join(lines) + "\n"


def lab_cgroup_conf() -> str:
    """cgroup.conf for hosts whose /proc/self/cgroup is hybrid (cgroup v1 controllers listed) while /sys/fs/cgroup
    is cgroup2, as in lab containers: slurmd 22.05 always loads a cgroup plugin (src/slurmd/slurmd/slurmd.c:1973),
    autodetect picks cgroup/v2 from /sys/fs/cgroup (src/common/cgroup.c:433-480) and v2 stops slurmd with "Hybrid
    mode is not supported" (src/plugins/cgroup/v2/cgroup_v2.c:154). The v1 plugin's init touches no cgroup
    (src/plugins/cgroup/v1/cgroup_v1.c:423-438), and proctrack/linuxproc with task/none never ask it for one.
    Key: cgroup.conf(5) CgroupPlugin, doc/man/man5/cgroup.conf.5:43 (same commit)."""
    return "# Written by gpunode for lab hosts; see gpunode/schedulers/slurm_conf.py\nCgroupPlugin=cgroup/v1\n"
