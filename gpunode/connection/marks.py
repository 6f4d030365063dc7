"""Phases inside one remote command, timed from its output as the controller receives it: each initramfs
generation and each DKMS build that a package install (or any command) runs.

Why from the output: it costs the host nothing (no wrapper, no diversion, no file written there), it works for the
generations a dpkg run starts by itself (a kernel's postinst hook, the initramfs-tools trigger), and the output
already streams line by line to the host log. What the lines are:
- initramfs-tools' update-initramfs prints `update-initramfs: Generating <image>` when it starts mkinitramfs
  (initramfs-tools 0.142+deb12u3 on the lab's Debian 12 hosts: tests/data/phases/SOURCES.md); mkinitramfs itself
  says nothing on success but its `W:`/`E:`/`I:` lines, so the generation ends at the next other line (dpkg's
  `Setting up ...` / `Processing triggers for ...`) or at the command's end.
- DKMS prints `Building module:`, `Cleaning build area...`, then the make line, whose progress dots come without a
  newline, so that line arrives whole only once make ended: the build ends at the first line after `Building module`
  that is not a cleaning line (dkms 3.0.10 on a lab host: tests/data/phases/dkms-build.txt).
The line before a generation that names a package (`Setting up P` / `Processing triggers for P`) says which
package's install asked for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

INITRAMFS = re.compile(r"^update-initramfs: Generating (\S+)")
DKMS_BUILD = re.compile(r"^Building module(?:\(s\))?:?\s*(\S*)")
DPKG_CONTEXT = re.compile(r"^(?:Setting up|Processing triggers for|Unpacking|Removing|Purging configuration files "
                          r"for) (\S+)")
# lines that belong to the phase in progress: mkinitramfs' messages; DKMS's cleaning before make
GOES_ON = {"initramfs": re.compile(r"^[WEI]: "), "dkms build": re.compile(r"^\s*$|^[Cc]leaning build area")}


@dataclass
class Mark:
    """One timed phase inside a command: `kind` initramfs or dkms build."""

    kind: str
    what: str             # the image generated, or the module built (when DKMS names it)
    after: str            # the dpkg line before it: which package's setup or trigger ran it ("" when none)
    started: float        # time.monotonic() at the line that began it
    seconds: float = 0.0
    command: int = -1     # index of the command (Transcript.records) it ran in

    def to_dict(self, label: str = "") -> dict[str, str | float]:
        return {"kind": self.kind, "what": self.what, "after": self.after, "command": label,
                "seconds": round(self.seconds, 3)}


@dataclass
class Marks:
    """Watches each output line of the running command; keeps the phases it saw, timed."""

    done: list[Mark] = field(default_factory=list)
    open: Mark | None = None
    context: str = ""

    def begin(self) -> None:
        """A command starts: no package context yet."""
        self.context, self.open = "", None

    def line(self, text: str, now: float) -> None:
        """One output line, arrived at `now`."""
        text = text.rstrip("\r")
        if self.open is not None and not GOES_ON[self.open.kind].match(text):
            self._close(now)
        if match := INITRAMFS.match(text):
            self.open = Mark("initramfs", match.group(1), self.context, now)
        elif match := DKMS_BUILD.match(text):
            self.open = Mark("dkms build", match.group(1).rstrip(":"), self.context, now)
        elif match := DPKG_CONTEXT.match(text):
            self.context = text.strip().removesuffix(" ...")

    def end(self, now: float, command: int) -> None:
        """The command ended (it is `command` in the transcript's records): a phase still open ends with it."""
        if self.open is not None:
            self._close(now)
        for mark in self.done:
            if mark.command < 0:
                mark.command = command

    def _close(self, now: float) -> None:
        assert self.open is not None
        self.open.seconds = max(0.0, now - self.open.started)
        self.done.append(self.open)
        self.open = None
