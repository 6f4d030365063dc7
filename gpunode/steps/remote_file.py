"""Reading a file's state in a probe, and writing a whole file atomically: shared by file-editing steps."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from gpunode.connection import join, q
from gpunode.scripts import script_text
from gpunode.steps.base import Action
from gpunode.steps.diffs import FileDiff

CONTENT_PREFIX = "base64:"  # marks file contents in probe output; transcripts elide such lines


@dataclass
class FileState:
    """A file as the probe saw it."""

    exists: bool
    mode: str = ""
    owner: str = ""
    group: str = ""
    sha256: str = ""
    content: str = ""


def probe_file(path: str) -> str:
    """Shell that prints the file's existence, mode/owner/group and base64 content (two programs: stat, base64;
    the sha256 is computed here from the content)."""
    p = q(path)
    return (f"if [ -f {p} ]; then echo present; stat -c '%a %U %G' {p}; "
            f"printf {CONTENT_PREFIX}; base64 -w0 < {p}; echo; else echo absent; fi")


def parse_file_probe(output: str) -> FileState:
    """The probe's lines by what they are: `present`, the `mode owner group` line, the `base64:` content line
    (a sha256 line, as older probes printed it, is ignored: the sha256 is the content's)."""
    lines = output.splitlines()
    if not lines or lines[0] != "present":
        return FileState(exists=False)
    mode, owner, group = (lines[1].split() + ["", "", ""])[:3] if len(lines) > 1 else ("", "", "")
    encoded = next((line.removeprefix(CONTENT_PREFIX) for line in lines if line.startswith(CONTENT_PREFIX)), "")
    data = base64.b64decode(encoded)
    return FileState(True, mode, owner, group, hashlib.sha256(data).hexdigest(),
                     data.decode("utf-8", errors="surrogateescape"))


def write_action(path: str, state: FileState, content: str, *, mode: str = "", owner: str = "",
                 group: str = "", backup: bool = True, validate: str = "", reason: str = "") -> Action:
    """An action that atomically replaces `path` with `content`, guarded against concurrent edits."""
    expect = hashlib.sha256(state.content.encode("utf-8", errors="surrogateescape")).hexdigest() \
        if state.exists else "absent"
    data = content.encode("utf-8", errors="surrogateescape")
    command = f"sh -c {q(script_text('atomic_write.sh'))} atomic-write " + join(
        [path, mode, owner, group, expect, "1" if backup else "0", validate, hashlib.sha256(data).hexdigest()]
    )
    return Action(
        summary=f"{'update' if state.exists else 'create'} {path}",
        reason=reason or ("content differs" if state.exists else "file does not exist"),
        command=command,
        stdin=data,
        diff=FileDiff(path, state.content, content),
        fix="check free space and permissions on the host; the old file was left untouched",
        writes=path,
    )
