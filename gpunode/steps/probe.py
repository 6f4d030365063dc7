"""The probe protocol: a step's probe is named shell snippets; all steps' snippets run as one script and the
output is split once, back into each step's sections.

    snippets = {"dkms": "dkms status", "held": "apt-mark showhold"}     # Step.probe(facts)
    batch = ProbeBatch([snippets, ...])
    outputs = batch.split(conn.run("sh -s", stdin=batch.script()).stdout)
    outputs[0]["dkms"]                                                     # what `dkms status` printed

Each section runs in its own subshell with stdin from /dev/null and stderr merged into stdout; its exit status is
data for its step, never a failure of the script. A section's output is returned exactly as printed (a missing
final newline stays missing); a section the step asked for that printed nothing reads as "". A section it did not
ask for is a bug in the step (a typo, or a read the step's own conditions never asked for): reading it raises
`ProbeSectionNotAsked`, which names the step kind and the section, wherever it is read (a real run, a plan case).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpunode.connection import q
from gpunode.errors import GpunodeError

Snippets = dict[str, str]  # section name -> shell snippet

SECTION_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class ProbeSectionNotAsked(LookupError):
    """A step read a probe section its `probe()` did not ask for: a bug in the step, never the host's failure (the
    runner reports it as an internal error). Not a KeyError, so that no `except KeyError` hides it."""


class ProbeOutput(dict[str, str]):
    """What one step's probe printed, per section name. `asked`: the sections the step's probe asked for (its
    snippets' names; by default the sections given): one asked for that is not here printed nothing and reads as "";
    one never asked for raises ProbeSectionNotAsked. `step` is the step's kind, named in that error."""

    def __init__(self, sections: Mapping[str, str] | Iterable[tuple[str, str]] = (), *,
                 asked: Iterable[str] | None = None, step: str = "", prefix: str = "") -> None:
        super().__init__(sections)
        self.sections_asked = frozenset(self) if asked is None else frozenset(asked)
        self.step = step
        self.prefix = prefix  # the step's own section name this output lies under (`within`), for the error

    def __missing__(self, name: str) -> str:
        if name in self.sections_asked:
            return ""
        def full(section: str) -> str:
            return f"{self.prefix}.{section}" if self.prefix else section
        asked = ", ".join(sorted(full(n) for n in self.sections_asked)) or "nothing"
        raise ProbeSectionNotAsked(f"{self.step or 'a step'} read probe section {full(name)!r} it did not ask for "
                                   f"(its probe() returns: {asked})")

    def asked(self, name: str) -> bool:
        """Whether the step's probe asked for section `name`: for a section a step asks for only on some hosts,
        read as `probe[name] if probe.asked(name) else ""` where the plan cannot tell as its probe did."""
        return name in self.sections_asked

    def within(self, prefix: str) -> ProbeOutput:
        """The sections placed under `prefix` by `nested(prefix, ...)`, with the prefix taken off."""
        start = f"{prefix}."
        return ProbeOutput({name[len(start):]: text for name, text in self.items() if name.startswith(start)},
                           asked=[name[len(start):] for name in self.sections_asked if name.startswith(start)],
                           step=self.step, prefix=f"{self.prefix}.{prefix}" if self.prefix else prefix)


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

    def split(self, stdout: str, steps: Iterable[str] = ()) -> list[ProbeOutput]:
        """The script's output as one ProbeOutput per probe, in the order of `probes` (each asking its snippets'
        names; `steps`, the step kinds in that order, name the step when one reads a section it did not ask for)."""
        kinds = list(steps) or [""] * len(self.probes)
        outputs = [ProbeOutput(asked=snippets, step=kind) for snippets, kind in zip(self.probes, kinds, strict=True)]
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
