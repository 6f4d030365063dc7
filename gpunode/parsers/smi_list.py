"""Parse `nvidia-smi -L`: "GPU n: NAME (UUID: GPU-...)" entries, MIG devices below them, in any wrapping.

Read by structure, not by line: entries may be indented (a quoted code block), run together on one line (a post
that lost its newlines), lack the closing parenthesis (a cut paste), or carry an empty UUID (`GPU-`, a GPU whose
UUID the driver cannot read). R450 MIG devices read "MIG 1g.5gb Device 0: (UUID: MIG-GPU-.../7/0)".
"""

from __future__ import annotations

import re

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.model import GpuInfo, SmiReport

_GPU = re.compile(r"\bGPU\s+(?P<index>\d+):\s+(?P<name>[^()\n]+?)\s+\(UUID:\s*(?P<uuid>GPU-[0-9A-Za-z-]*)\)?")
_MIG = re.compile(r"\bMIG\s+\S+\s+Device\s+\d+:\s+\(UUID:\s*MIG-[^)\s]+\)?")
# A line that is not an entry but may sit between them in a paste: a pod or host name, an ellipsis.
_LABEL = re.compile(r"^\s*(?:[\w.-]{1,60}|\.{3}|…)\s*$")
# A UUID that names a GPU: hex digits (a masked "GPU-xxxxxxxx-..." from a post identifies nothing).
_HEX_UUID = re.compile(r"^GPU-[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)+$")
_FIX = "capture it again with `nvidia-smi -L`"


def _entries(line: str) -> list[re.Match[str]]:
    """The -L entries on one line, in order, when the line holds nothing else."""
    found = sorted([*_GPU.finditer(line), *_MIG.finditer(line)], key=lambda m: m.start())
    rest = line
    for match in reversed(found):
        rest = rest[:match.start()] + rest[match.end():]
    return found if found and not rest.strip() else []


def is_smi_list(text: str) -> bool:
    """Whether text is `nvidia-smi -L` output: every non-blank line entries only, or a short label between."""
    lines = [line for line in text.splitlines() if line.strip()]
    entries = [line for line in lines if _entries(line)]
    return bool(entries) and all(_entries(line) or _LABEL.match(line) for line in lines) and \
        len(entries) * 2 >= len(lines) and any(_GPU.search(line) for line in entries)


def parse_smi_list(text: str) -> SmiReport:
    """The GPUs of `nvidia-smi -L` output (an empty UUID is kept as None, the GPU flagged uuid_missing)."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        if line.strip() and not _entries(line) and not _LABEL.match(line):
            raise SmiParseError(f"unexpected line in `nvidia-smi -L` output: {line.strip()!r}", fix=_FIX)
        for entry in _entries(line):
            if entry.re is _MIG:
                if gpus:
                    gpus[-1].mig_devices += 1
                    gpus[-1].mig_mode_current = True
                continue
            uuid = entry.group("uuid")
            gpus.append(GpuInfo(index=int(entry.group("index")), name=entry.group("name").strip(),
                                uuid=uuid if _HEX_UUID.match(uuid) else None, uuid_missing=uuid == "GPU-"))
    if not gpus:
        raise SmiParseError("no 'GPU n: NAME (UUID: ...)' lines", fix=_FIX)
    return SmiReport(driver_version=None, cuda_version=None, attached_gpus=None, gpus=gpus, source_kind="list")


def gpus_listed_in(text: str) -> SmiReport:
    """The GPUs named by the "GPU n: NAME (UUID: GPU-...)" heading lines of other nvidia-smi outputs that use them
    (`nvlink -s`, `nvlink -e`), their other lines ignored."""
    gpus = [GpuInfo(index=int(m.group("index")), name=m.group("name").strip(),
                    uuid=m.group("uuid") if _HEX_UUID.match(m.group("uuid")) else None)
            for line in text.splitlines() if (m := _GPU.match(line.strip())) is not None]
    return SmiReport(driver_version=None, cuda_version=None, attached_gpus=None, gpus=gpus, source_kind="list")
