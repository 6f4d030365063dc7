"""The probe protocol: a step's probe is named shell snippets; all steps' snippets run as one script and the
output is split once, back into each step's sections.

    snippets = {"dkms": "dkms status", "held": "apt-mark showhold"}     # Step.probe(facts)
    batch = ProbeBatch([snippets, ...])
    outputs = batch.split(conn.run("sh -s", stdin=batch.script()).stdout)
    outputs[0]["dkms"]                                                     # what `dkms status` printed

Each section runs in its own subshell with stdin from /dev/null and stderr merged into stdout; its exit status is
data for its step, never a failure of the script. A section's output is returned exactly as printed (a missing
final newline stays missing); a section that printed nothing, or was never probed, reads as "".
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpunode.connection import q
from gpunode.errors import GpunodeError

Snippets = dict[str, str]  # section name -> shell snippet

SECTION_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class ProbeOutput(dict[str, str]):
    """What one step's probe printed, per section name; a section not in it reads as ""."""

    def __missing__(self, name: str) -> str:
        return ""

    def within(self, prefix: str) -> ProbeOutput:
        """The sections placed under `prefix` by `nested(prefix, ...)`, with the prefix taken off."""
        start = f"{prefix}."
        return ProbeOutput({name[len(start):]: text for name, text in self.items() if name.startswith(start)})


def nested(prefix: str, snippets: Mapping[str, str]) -> Snippets:
    """Another component's snippets (a package manager's) under a step's own section name `prefix`."""
    return {f"{prefix}.{name}": snippet for name, snippet in snippets.items()}


@dataclass
class ProbeBatch:
    """The probes of several steps as one shell script, and its output split back per step and section."""

    probes: list[Mapping[str, str]]
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def __post_init__(self) -> None:
        for snippets in self.probes:
            for name in snippets:
                if not SECTION_NAME.fullmatch(name):
                    raise ValueError(f"probe section name {name!r}: letters, digits, '_', '.' and '-' only")

    def _marker(self, tag: str) -> str:
        # printf's leading newline ends a section whose output has no final newline; split() takes it off again
        return f"printf '\\n%s\\n' {q(f'@@probe-{self.nonce} {tag}')}\n"

    def script(self) -> str:
        """One POSIX sh script running every section of every probe, each after its own marker line."""
        parts = []
        for index, snippets in enumerate(self.probes):
            for name, snippet in snippets.items():
                body = snippet if snippet.strip() else ":"  # `( )` would be a syntax error
                parts.append(f"{self._marker(f'{index} {name}')}( {body}\n) </dev/null 2>&1\n")
        return "".join(parts) + self._marker("end")

    def split(self, stdout: str) -> list[ProbeOutput]:
        """The script's output as one ProbeOutput per probe, in the order of `probes`."""
        outputs = [ProbeOutput() for _ in self.probes]
        ended = False
        for chunk in stdout.split(f"\n@@probe-{self.nonce} ")[1:]:
            header, _, body = chunk.partition("\n")
            if header == "end":
                ended = True
                break
            index, _, name = header.partition(" ")
            outputs[int(index)][name] = body
        if self.probes and not ended:
            raise GpunodeError("the probe's output ended early (the shell running it was killed or cut off)",
                               step="probe", fix="see the host log; run again")
        return outputs
