"""The apt sources of a host: read in a probe (one-line sources.list and *.list, deb822 *.sources), and the edit that
adds archive components to the distro's own entries, one atomic write (with a backup) per file, the user's lines
kept as they are.

Probe output, per file that exists: `@@file PATH`, the file's lines, and `@@no-eol` after a last line without a
newline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpunode.steps.base import Action
from gpunode.steps.remote_file import FileState, write_action

SOURCES_GLOBS = ("/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources")
FILE_MARK = "@@file "
NO_EOL = "@@no-eol"

IsArchive = Callable[[str, str], bool]  # (uri, suite) -> the distro's own archive


def sources_probe() -> str:
    """Shell that prints every apt sources file (see the module's docstring for the format)."""
    return (f"for f in {' '.join(SOURCES_GLOBS)}; do [ -f \"$f\" ] || continue; printf '{FILE_MARK}%s\\n' \"$f\"; "
            f"cat -- \"$f\"; [ -z \"$(tail -c 1 -- \"$f\")\" ] || printf '\\n{NO_EOL}\\n'; done")


def parse_sources_probe(output: str) -> dict[str, str]:
    """Path -> content of each file the probe printed."""
    files: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in output.splitlines():
        if line.startswith(FILE_MARK):
            lines = files.setdefault(line[len(FILE_MARK):], [])
        elif files:
            lines.append(line)
    result = {}
    for path, body in files.items():
        if body and body[-1] == NO_EOL:
            result[path] = "\n".join(body[:-1])
        else:
            result[path] = "".join(f"{line}\n" for line in body)
    return result


@dataclass
class Entry:
    """One deb entry: a one-line `deb` line, or a deb822 stanza (its Components line's index)."""

    path: str
    line: int                     # the line to append components to
    suites: tuple[str, ...]
    components: tuple[str, ...]
    archive: bool                 # one of its (uri, suite) pairs is the distro's own archive


def _one_line_entries(path: str, lines: list[str], is_archive: IsArchive) -> list[Entry]:
    entries = []
    for number, line in enumerate(lines):
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            entries.append(Entry(path, number, (words[2],), tuple(words[3:]), is_archive(words[1], words[2])))
    return entries


def _stanzas(lines: list[str]) -> Iterable[dict[str, tuple[int, str]]]:
    """Each deb822 stanza as field (lowercase) -> (index of its last line, value with continuation lines)."""
    fields: dict[str, tuple[int, str]] = {}
    last = ""
    for number, line in enumerate([*lines, ""]):
        if not line.strip():
            if fields:
                yield fields
            fields, last = {}, ""
        elif line.lstrip().startswith("#"):
            continue
        elif line[0] in " \t" and last:
            fields[last] = (number, f"{fields[last][1]} {line.strip()}")
        elif ":" in line:
            key, value = line.split(":", 1)
            last = key.strip().lower()
            fields[last] = (number, value.strip())


def _deb822_entries(path: str, lines: list[str], is_archive: IsArchive) -> list[Entry]:
    entries = []
    for fields in _stanzas(lines):
        types = fields.get("types", (0, ""))[1].split()
        if "deb" not in types or fields.get("enabled", (0, "yes"))[1].lower() == "no" or "components" not in fields:
            continue
        suites = tuple(fields.get("suites", (0, ""))[1].split())
        line, components = fields["components"]
        archive = any(is_archive(uri, suite) for uri in fields.get("uris", (0, ""))[1].split() for suite in suites)
        entries.append(Entry(path, line, suites, tuple(components.split()), archive))
    return entries


def _entries(files: dict[str, str], is_archive: IsArchive) -> list[Entry]:
    entries = []
    for path, content in files.items():
        read = _deb822_entries if path.endswith(".sources") else _one_line_entries
        entries += read(path, content.splitlines(), is_archive)
    return entries


def _with_components(line: str, extra: list[str]) -> str:
    """`line` with `extra` appended to its values, before a trailing comment."""
    code, hash_, comment = line.partition("#")
    stripped = code.rstrip()
    return f"{stripped} {' '.join(extra)}{code[len(stripped):]}{hash_}{comment}"


def planned_sources(files: dict[str, str], needed: tuple[str, ...],
                    is_archive: IsArchive) -> dict[str, tuple[str, list[str]]]:
    """Path -> (new content, the components added) of each file whose archive entries (those listing main) lack
    some of `needed` for a suite no other entry gives them to; files that need no change are left out."""
    entries = [e for e in _entries(files, is_archive) if e.archive]
    have: dict[str, set[str]] = {}
    for entry in entries:
        for suite in entry.suites:
            have.setdefault(suite, set()).update(entry.components)
    changed: dict[str, tuple[list[str], list[str]]] = {}
    for entry in entries:
        extra = [c for c in needed if c not in entry.components and any(c not in have[s] for s in entry.suites)]
        if not extra or "main" not in entry.components:
            continue
        lines, added = changed.setdefault(entry.path, (files[entry.path].split("\n"), []))
        lines[entry.line] = _with_components(lines[entry.line], extra)
        added += [c for c in extra if c not in added]
    return {path: ("\n".join(lines), [c for c in needed if c in added]) for path, (lines, added) in changed.items()}


def sources_actions(probe: str, needed: tuple[str, ...], is_archive: IsArchive, reason: str) -> list[Action]:
    """One atomic write (a backup kept, the diff shown in check mode) per sources file whose archive entries lack
    `needed` components; none when every one lists them (or no entry is the distro's archive)."""
    if not needed:
        return []
    files = parse_sources_probe(probe)
    actions = []
    for path, (content, added) in planned_sources(files, needed, is_archive).items():
        action = write_action(path, FileState(True, content=files[path]), content, reason=reason)
        action.summary = f"enable {' '.join(added)} in {path}"
        action.fix = f"add {' '.join(added)} to the Components of the archive's entries in {path} by hand, or " \
            "use method: cuda-repo"
        actions.append(action)
    return actions
