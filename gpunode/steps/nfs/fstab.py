"""gpunode's fstab lines: one per mount point, under a marker comment, edited in place, others left byte for byte."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER_PREFIX = "# gpunode: managed nfs_mount "
_ESCAPES = {" ": "\\040", "\t": "\\011", "\n": "\\012", "\\": "\\134"}


class FstabConflict(ValueError):
    """fstab holds a line for the mount point that gpunode did not write, or a broken one of its own."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def escape(value: str) -> str:
    """fstab's octal escapes for blanks and backslashes (fstab(5))."""
    return "".join(_ESCAPES.get(c, c) for c in value)


def unescape(value: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), value)


def normalize(path: str) -> str:
    """/mnt//x/ -> /mnt/x (mount points compare equal however they were written)."""
    return "/" + "/".join(p for p in path.split("/") if p and p != ".")


def marker(path: str) -> str:
    return MARKER_PREFIX + escape(normalize(path))


def entry_line(source: str, path: str, fstype: str, options: str) -> str:
    return f"{escape(source)} {escape(normalize(path))} {fstype} {options} 0 0"


@dataclass
class Found:
    """Where fstab mentions a mount point: line indexes (0-based) of gpunode markers and of entries."""

    lines: list[str]
    markers: list[int] = field(default_factory=list)
    entries: list[int] = field(default_factory=list)

    @property
    def managed(self) -> int | None:
        """Index of gpunode's entry when fstab holds exactly a marker and its entry right below it."""
        if len(self.markers) == 1 and self.entries == [self.markers[0] + 1]:
            return self.entries[0]
        return None


def fields_of(line: str) -> list[str]:
    stripped = line.strip()
    return [] if not stripped or stripped.startswith("#") else stripped.split()


def find(text: str, path: str) -> Found:
    """The markers and entries for `path` in fstab text."""
    target = normalize(path)
    lines = text.split("\n")
    found = Found(lines)
    for i, line in enumerate(lines):
        if line.rstrip() == marker(target):
            found.markers.append(i)
        parts = fields_of(line)
        if len(parts) >= 2 and normalize(unescape(parts[1])) == target:
            found.entries.append(i)
    return found


def edit(text: str, path: str, line: str | None) -> str:
    """fstab text with gpunode's line for `path` set to `line` (None removes it). Raises FstabConflict."""
    found = find(text, path)
    lines = found.lines
    check(found, path)
    index = found.managed
    if index is not None:
        if line is None:
            del lines[index - 1:index + 1]
        else:
            lines[index] = line
        return "\n".join(lines)
    if line is None:
        return text
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return prefix + marker(path) + "\n" + line + "\n"


def check(found: Found, path: str) -> None:
    """Raise FstabConflict unless fstab has nothing for `path` or exactly gpunode's well-formed pair."""
    shown = {i: f"line {i + 1}: {found.lines[i].strip()!r}" for i in found.markers + found.entries}
    hand_over = f"put `{marker(path)}` on the line above it to hand it to gpunode"
    if len(found.entries) > 1:
        raise FstabConflict(
            f"fstab mounts {path} {len(found.entries)} times ({'; '.join(shown[i] for i in found.entries)})",
            "keep at most one line for a mount point: delete the others, then run again")
    if len(found.markers) > 1:
        raise FstabConflict(f"fstab has {len(found.markers)} gpunode markers for {path} "
                            f"(lines {', '.join(str(i + 1) for i in found.markers)})",
                            "delete the extra marker lines, then run again")
    if found.markers and not found.entries:
        raise FstabConflict(f"gpunode's marker for {path} ({shown[found.markers[0]]}) has no fstab line under it: "
                            "the line was removed or commented out by hand",
                            "delete the marker line (gpunode then writes a fresh line), or restore the line below it")
    if found.entries and not found.markers:
        raise FstabConflict(f"fstab already mounts {path} with a line gpunode did not write "
                            f"({shown[found.entries[0]]}); not overwriting it",
                            f"delete that line, or {hand_over}, then run again")
    if found.entries and found.managed is None:
        raise FstabConflict(f"fstab's line for {path} ({shown[found.entries[0]]}) is not right under gpunode's "
                            f"marker ({shown[found.markers[0]]})",
                            "move the marker right above the line (or delete the marker), then run again")
    if found.managed is not None and len(fields_of(found.lines[found.managed])) < 4:
        raise FstabConflict(f"gpunode's fstab line for {path} is broken ({shown[found.managed]}): "
                            "an fstab line needs at least source, mount point, type and options",
                            "delete the marker and the broken line, then run again")
