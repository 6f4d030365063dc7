"""Packer's `-machine-readable` output: `timestamp,target,type,data...` lines, parsed as they arrive."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MachineLine:
    """One line; `data` has Packer's escapes undone (commas, newlines)."""

    timestamp: int
    target: str
    kind: str
    data: tuple[str, ...]

    @property
    def ui_text(self) -> str | None:
        """The human text of a `ui` line (say, message, error), else None."""
        if self.kind == "ui" and len(self.data) >= 2:
            return self.data[1]
        return None

    @property
    def is_error(self) -> bool:
        return self.kind == "ui" and bool(self.data) and self.data[0] == "error"


def unescape(value: str) -> str:
    return value.replace("%!(PACKER_COMMA)", ",").replace("\\n", "\n").replace("\\r", "\r")


def parse_line(line: str) -> MachineLine | None:
    """A machine-readable line, or None for anything else (plain output of a crashed plugin, blank lines)."""
    parts = line.rstrip("\r\n").split(",")
    if len(parts) < 3 or not parts[0].isdigit():
        return None
    return MachineLine(int(parts[0]), parts[1], parts[2], tuple(unescape(p) for p in parts[3:]))


@dataclass
class Artifacts:
    """`artifact` rows collected per build: {target: {index: {key: value}}}."""

    builds: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    def add(self, line: MachineLine) -> None:
        if line.kind != "artifact" or len(line.data) < 2:
            return
        index, key, rest = line.data[0], line.data[1], line.data[2:]
        if key == "file" and len(rest) >= 2:  # artifact,0,file,N,PATH
            key, rest = f"file,{rest[0]}", rest[1:]
        value = ",".join(rest)
        self.builds.setdefault(line.target, {}).setdefault(index, {})[key] = value

    def ids(self) -> list[str]:
        """Artifact ids (`us-east-1:ami-0abc`, a qcow2 name...), in build order."""
        return [a["id"] for build in self.builds.values() for a in build.values() if a.get("id")]

    def files(self) -> list[str]:
        found = []
        for build in self.builds.values():
            for artifact in build.values():
                found += [v for k, v in sorted(artifact.items()) if k.startswith("file,")]
        return found
