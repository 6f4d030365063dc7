"""The message catalogue: format strings of the programs that print GPU messages (messages/<program>.yaml), read
lazily and validated, each with the finding a line it matches gives. Schema: messages/README.md.

A line's best entry is the matching entry with the most literal characters (its most specific wording); ties go to
the first in file-name then entry order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from gpunode.parsers.message_format import (
    STYLES,
    FormatError,
    format_regex,
    literal_length,
    needle,
    pieces,
    sample_line,
)
from gpunode.parsers.regex_needles import fold, indexes_holding, without_space

CATALOGUE_DIR = Path(__file__).with_name("messages")
VENDORS = ("nvidia", "amd", "intel", "other")
SEVERITIES = ("critical", "warning", "info")
CONTEXTS = ("host", "container", "kernel", "kubernetes", "framework", "build")
MIN_LITERAL = 6  # a format with fewer literal characters (and no required prefix) says too little to be matched
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
_PROGRAM = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_FILE_KEYS = {"program", "vendor", "versions", "source", "entries"}
_ENTRY_KEYS = {"format", "style", "path", "line", "commit", "versions", "prefix", "prefix_required", "anchor",
               "finding", "severity", "context", "summary", "fix"}


class CatalogueError(ValueError):
    """A catalogue file or entry that breaks the schema; the text names the file and the entry."""


@dataclass(frozen=True)
class MessageEntry:
    """One format string of one program and the finding a line made from it gives."""

    program: str
    vendor: str
    finding: str
    severity: str
    context: str
    summary: str
    fix: str | None  # None: the existing finding's fix applies
    format: str
    style: str
    prefix: str
    prefix_required: bool
    file: str
    index: int  # 1-based position in its file
    source: str  # "repo@commit:path:line" or "doc-url#anchor"
    versions: str
    pattern: re.Pattern[str]
    literal_length: int
    needle: str

    @property
    def sample(self) -> str:
        """A line the program could print from this format (each field filled with a value of its type)."""
        return sample_line(pieces(self.format, self.style), self.prefix)


class MessageMatch(NamedTuple):
    """A line and the catalogue entry that reads it."""

    entry: MessageEntry
    line: str


def load_catalogue() -> tuple[MessageEntry, ...]:
    """Every entry of every messages/*.yaml file, in file-name then entry order (CatalogueError when one is bad);
    read once per process."""
    return read_folder(CATALOGUE_DIR)


@cache
def read_folder(folder: Path) -> tuple[MessageEntry, ...]:
    """Every entry of every *.yaml file in folder, validated (CatalogueError names the file and the entry)."""
    import yaml  # only when a diagnosis needs the catalogue

    entries: list[MessageEntry] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise CatalogueError(f"{path.name}: not valid YAML: {exc}") from None
        entries += _file_entries(path.name, data)
    return tuple(entries)


def _file_entries(name: str, data: Any) -> list[MessageEntry]:
    if not isinstance(data, dict):
        raise CatalogueError(f"{name}: expected a mapping with program, vendor, versions, source, entries")
    _keys(name, data, _FILE_KEYS, {"program", "vendor", "source", "entries"})
    program = data["program"]
    if program != name.removesuffix(".yaml") or not _PROGRAM.match(str(program)):
        raise CatalogueError(f"{name}: program {program!r} must be the file name, kebab-case")
    if data["vendor"] not in VENDORS:
        raise CatalogueError(f"{name}: vendor {data['vendor']!r} is not one of {', '.join(VENDORS)}")
    source = data["source"]
    if not isinstance(source, dict) or not (("repo" in source and _COMMIT.match(str(source.get("commit", ""))))
                                            or str(source.get("doc", "")).startswith("https://")):
        raise CatalogueError(f"{name}: source needs repo + commit (40 hex) or doc (an https URL)")
    if not isinstance(data["entries"], list) or not data["entries"]:
        raise CatalogueError(f"{name}: entries must be a non-empty list")
    return [_entry(name, data, index, raw) for index, raw in enumerate(data["entries"], 1)]


def _keys(where: str, data: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    unknown, missing = sorted(set(data) - allowed), sorted(required - set(data))
    if unknown or missing:
        raise CatalogueError(f"{where}: " + "; ".join(
            part for part in (f"unknown key(s) {', '.join(unknown)}" if unknown else "",
                              f"missing {', '.join(missing)}" if missing else "") if part))


def _entry(name: str, data: dict[str, Any], index: int, raw: Any) -> MessageEntry:
    text = raw.get("format") if isinstance(raw, dict) else None
    where = f"{name}: entry {index}" + (f" (format {text!r})" if text else "")
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: expected a mapping")
    _keys(where, raw, _ENTRY_KEYS, {"format", "style", "finding", "severity", "context", "summary"})
    cited = _cited(where, data["source"], raw)
    _check_fields(where, raw, text)
    text = str(text)  # present: _keys required it
    prefix, required = raw.get("prefix", ""), bool(raw.get("prefix_required", False))
    try:
        parts = pieces(text, raw["style"])
    except FormatError as exc:
        raise CatalogueError(f"{where}: {exc}") from None
    kept_prefix = prefix if required else ""  # an optional prefix makes no line more specific
    if literal_length(parts, kept_prefix) < MIN_LITERAL:
        raise CatalogueError(f"{where}: too little literal text to be recognised (fewer than {MIN_LITERAL} "
                             "characters): skip it or give it a required prefix")
    pattern = re.compile(format_regex(parts, prefix, required), re.IGNORECASE)
    return MessageEntry(
        program=data["program"], vendor=data["vendor"], finding=raw["finding"], severity=raw["severity"],
        context=raw["context"], summary=raw["summary"].strip(), fix=(raw.get("fix") or "").strip() or None,
        format=text, style=raw["style"], prefix=prefix, prefix_required=required, file=name, index=index,
        source=cited, versions=str(raw.get("versions", data.get("versions", ""))), pattern=pattern,
        literal_length=literal_length(parts, kept_prefix), needle=needle(parts, kept_prefix))


def _cited(where: str, source: dict[str, Any], raw: dict[str, Any]) -> str:
    """Where the entry's format was read: "repo@commit:path:line" or "doc-url#anchor"."""
    if "repo" in source:
        if not isinstance(raw.get("path"), str) or not isinstance(raw.get("line"), int) or raw["line"] < 1:
            raise CatalogueError(f"{where}: a repository source needs the entry's path and line (1-based)")
        if "commit" in raw and not _COMMIT.match(str(raw["commit"])):
            raise CatalogueError(f"{where}: commit must be 40 hex digits")
        return f"{source['repo']}@{raw.get('commit', source['commit'])}:{raw['path']}:{raw['line']}"
    anchor = raw.get("anchor") or source.get("anchor") or raw.get("line") or ""
    return f"{source['doc']}#{anchor}" if anchor else source["doc"]


def _check_fields(where: str, raw: dict[str, Any], text: Any) -> None:
    """CatalogueError naming the first field of the entry that breaks the schema."""
    checks = ((raw["style"] in STYLES, f"style must be one of {', '.join(STYLES)}"),
              (isinstance(text, str) and text.strip() != "", "format must be a non-empty string"),
              (_ID.match(str(raw["finding"])) is not None, "finding must be a kebab-case id"),
              (raw["severity"] in SEVERITIES, f"severity must be one of {', '.join(SEVERITIES)}"),
              (raw["context"] in CONTEXTS, f"context must be one of {', '.join(CONTEXTS)}"),
              (isinstance(raw["summary"], str) and raw["summary"].strip() != "", "summary must be a line of text"),
              (raw.get("fix") is None or (isinstance(raw["fix"], str) and raw["fix"].strip() != ""),
               "fix must be text when given"),
              (isinstance(raw.get("prefix", ""), str), "prefix must be text"))
    for ok, problem in checks:
        if not ok:
            raise CatalogueError(f"{where}: {problem}")


def _key(line: str) -> str:
    return without_space(fold(line))


def match_line(line: str) -> MessageMatch | None:
    """The best entry matching one line (any vendor), or None."""
    key = _key(line)
    best: MessageEntry | None = None
    for entry in load_catalogue():
        if entry.needle in key and (best is None or entry.literal_length > best.literal_length) \
                and entry.pattern.search(line):
            best = entry
    return MessageMatch(best, line.strip()) if best else None


def message_vendor(line: str) -> str | None:
    """The vendor (nvidia, amd, intel, other) of the best entry matching line, else None."""
    found = match_line(line)
    return found.entry.vendor if found else None


def foreign_vendor(line: str) -> str | None:
    """amd, intel or other when the best entry matching line is not NVIDIA's (keep it out of NVIDIA evidence);
    None when no entry matches or the best match is an NVIDIA entry."""
    vendor = message_vendor(line)
    return vendor if vendor not in (None, "nvidia") else None


def message_matches(text: str, vendors: frozenset[str] | None = None) -> list[MessageMatch]:
    """Every line of text a catalogue entry reads, with its best entry (of any vendor), in text order; only those
    whose best entry is of these vendors (all when None)."""
    lines = text.split("\n")
    best = _best_entries(lines)
    return [MessageMatch(best[index], lines[index].strip()) for index in sorted(best)
            if vendors is None or best[index].vendor in vendors]


# A text names NVIDIA's stack: its driver or tools, its PCI vendor id, its Kubernetes resource, its kernel modules.
_NAMES_NVIDIA = re.compile(r"nvidia|\b10de\b|\bNVRM\b|\bcuda", re.IGNORECASE)


def nvidia_matches(text: str) -> list[MessageMatch]:
    """The catalogue's matches that are evidence about NVIDIA's stack: entries of vendor nvidia, and entries of
    vendor other outside the kernel (DKMS, kubelet, runc: programs whose words name no vendor) when the text names
    NVIDIA's stack (the module DKMS built, the `nvidia.com/gpu` resource, the NVIDIA hook). Kernel messages of
    vendor other (PCIe AER of a device) are left to the checks that know which device they name."""
    names_nvidia = bool(_NAMES_NVIDIA.search(text))
    return [match for match in message_matches(text) if match.entry.vendor == "nvidia" or (
        names_nvidia and match.entry.vendor == "other" and match.entry.context != "kernel")]


def line_vendors(lines: list[str]) -> list[str | None]:
    """message_vendor() of many lines at once (one substring search per entry over all of them): for each line the
    vendor of its best entry, else None."""
    best = _best_entries(lines)
    return [best[index].vendor if index in best else None for index in range(len(lines))]


def _best_entries(lines: list[str]) -> dict[int, MessageEntry]:
    """line index -> its best entry. A plain substring search over all lines at once finds, per needle, the lines
    that may match; an entry's regex runs only on those."""
    entries = load_catalogue()
    if not entries or not lines:
        return {}
    keys = _keys_of(lines)
    starts = [0]
    for key in keys:
        starts.append(starts[-1] + len(key) + 1)
    joined = "\n".join(keys)
    by_needle: dict[str, list[MessageEntry]] = {}
    for entry in entries:
        by_needle.setdefault(entry.needle, []).append(entry)
    best: dict[int, MessageEntry] = {}
    for word, group in by_needle.items():
        for index in indexes_holding(joined, starts, (word,)):
            for entry in group:
                current = best.get(index)
                if (current is None or entry.literal_length > current.literal_length) and \
                        entry.pattern.search(lines[index]):
                    best[index] = entry
    return best


_LINE_SPACE = " \t\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what without_space() removes from an ASCII line


def _keys_of(lines: list[str]) -> list[str]:
    """_key() of every line, the ASCII ones computed over the joined text at once (same result, much faster)."""
    text = "\n".join(lines)
    text = (text if text.isascii() else text.encode("ascii", "replace").decode("ascii")).lower()  # fast ASCII
    for space in _LINE_SPACE:
        text = text.replace(space, "")
    keys = text.split("\n")
    if len(keys) != len(lines):  # a line holding a newline itself
        return [_key(line) for line in lines]
    return [key if line.isascii() else _key(line) for key, line in zip(keys, lines, strict=True)]
