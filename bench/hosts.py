"""Fresh lab hosts for one tool's runs, with sshd logging every session so remote commands can be counted.

Counting in sshd's log is the same yardstick for all three tools: every exec, shell or sftp channel logs
"Starting session:" at LogLevel VERBOSE, every login "Accepted publickey".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.workload import Access, BenchHost, seed_host
from gpunode.lab.host import LabHost
from gpunode.lab.lab import Lab
from gpunode.lab.rootfs import LAB_USER

VERBOSE_SSHD = "echo 'LogLevel VERBOSE' > /etc/ssh/sshd_config.d/90-bench.conf && systemctl reload ssh"
JOURNAL_SETTLE_SECONDS = 0.5


@dataclass
class SshdCounts:
    """Remote work seen by the hosts' sshd, summed over hosts."""

    sessions: int = 0   # exec / shell / subsystem channels: remote commands
    logins: int = 0     # SSH connections authenticated

    def __add__(self, other: SshdCounts) -> SshdCounts:
        return SshdCounts(self.sessions + other.sessions, self.logins + other.logins)


def access(lab: Lab) -> Access:
    return Access(LAB_USER, str(lab.key_path), str(lab.known_hosts_path))


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INSTANCES_PER_HOST = 16  # a booted host's systemd, journald, logind... each hold inotify instances (all as root)


def raise_inotify_limit(hosts: int) -> None:
    """Room for this many more hosts: past the default 128 instances systemd in a new host dies at boot
    ("Failed to create control group inotify object: Too many open files"). Only ever raised."""
    wanted = 512 + hosts * INSTANCES_PER_HOST
    if int(INOTIFY_INSTANCES.read_text()) < wanted:
        INOTIFY_INSTANCES.write_text(f"{wanted}\n")


@contextmanager
def fresh_hosts(lab: Lab, first_index: int, count: int) -> Iterator[list[LabHost]]:
    """`count` brand-new hosts (indices first_index...), seeded and verbose-logging; removed afterwards."""
    hosts: list[LabHost] = []
    raise_inotify_limit(count)
    try:
        for index in range(first_index, first_index + count):
            hosts.append(lab.add_host(index))
        for host in hosts:
            result = host.run_inside(VERBOSE_SSHD)
            if result.returncode != 0:
                raise RuntimeError(f"{host.name}: cannot make sshd verbose: {result.stderr}")
            seed_host(host.root)
        yield hosts
    finally:
        for host in hosts:
            lab.remove_host(host.name)


def bench_hosts(hosts: list[LabHost]) -> list[BenchHost]:
    return [BenchHost(h.name, h.address) for h in hosts]


def sshd_counts(hosts: list[LabHost], since: float) -> SshdCounts:
    """Sessions and logins logged by sshd on these hosts since `since` (time.time(): the hosts share our clock)."""
    time.sleep(JOURNAL_SETTLE_SECONDS)  # let journald receive the last lines
    total = SshdCounts()
    for host in hosts:
        text = host.run_inside(
            f"journalctl --sync; journalctl --since @{since:.6f} --no-pager -o cat SYSLOG_IDENTIFIER=sshd").stdout
        total = total + SshdCounts(text.count("Starting session:"), text.count("Accepted publickey"))
    return total
