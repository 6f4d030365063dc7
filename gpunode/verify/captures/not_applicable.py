"""Captures that are recognised but carry no health evidence (listed as "n/a", never as unknown)."""

from __future__ import annotations

import re

# Recognised files that carry no health evidence: listed as "not applicable", never as unknown.
_NOT_APPLICABLE = (
    ("smi-topo", re.compile(r"GPU0\s.*CPU Affinity"), "nvidia-smi topo -m"),
    ("smi-topo", re.compile(r"^\s*GPU0(?:[ \t]+GPU\d+)+[ \t]*\n\s*GPU0[ \t]+X\b", re.M), "nvidia-smi topo -p2p"),
    ("smi-nvlink", re.compile(r"^GPU \d+: .*\n\s+Link \d+: ", re.M), "nvidia-smi nvlink -s"),
    ("smi-dmon", re.compile(r"^\\?# gpu\s+(?:pwr|sm)\b", re.M), "nvidia-smi dmon / pmon"),
    ("smi-help", re.compile(r"List of valid properties to query|NVIDIA System Management Interface -- "
                            r"v\d", re.M), "nvidia-smi help text"),
    ("command-line", re.compile(r"^\s*(?:\$ )?nvidia-smi\S*(?: [^\n]*)?\s*$"), "an nvidia-smi command line"),
    ("uname", re.compile(r"^Linux \S+ \d+\.\d+\S* #"), "uname -a"),
    ("driver-version", re.compile(r"^NVRM version: ", re.M), "/proc/driver/nvidia/version"),
    ("dkms-status", re.compile(r"^(?:[\w-]+[/,] ?[\w.-]+.*: (?:installed|built|added)\S*)(?:\n|$)"),
     "dkms status"),
    ("docker-daemon-json", re.compile(r"^\s*\{[\s\S]*\"(?:runtimes|default-runtime|log-driver|"
                                      r"exec-opts|data-root)\"", re.M), "docker daemon.json"),
    ("fabricmanager-log", re.compile(r"^\[\w{3} \d{1,2} \d{4} \d{2}:\d{2}:\d{2}\] \[(?:INFO|WARNING|ERROR)\] "
                                     r"\[tid \d+\]"), "nvidia-fabricmanager's own log"),
    ("collect-note", re.compile(r"^# gpunode-collect: ", re.M), "a note written by `gpunode collect`"),
)

NOT_APPLICABLE_KINDS = frozenset(kind for kind, _, _ in _NOT_APPLICABLE)


def not_applicable_kind(text: str) -> tuple[str, str] | None:
    """(kind, what it is) when text is a recognised capture without health evidence, else None."""
    for kind, pattern, what in _NOT_APPLICABLE:
        if pattern.search(text):
            return kind, what
    return None
