"""Regexes and sample lines derived from a program's own format strings (printf, brace, literal).

A format is split into literal text and variable fields. The derived pattern escapes the literal text, lets every
whitespace run be any whitespace (or none: spaces lost or doubled by a terminal or a poster), lets a quote or a
backslash carry the escaping a log wrapper adds (`msg="... \\"x\\" ..."` of Go loggers, JSON), and turns each field
into a bounded, non-greedy match of its type. A string field at either end of a format is dropped (searching a line
already allows any text there); the message may sit anywhere in a longer line (timestamps, logger wrappers).
"""

from __future__ import annotations

import re
from typing import NamedTuple

STYLES = ("printf", "brace", "literal")
# printf conversions, C and Go: flags, width, precision, length modifier, conversion
_PRINTF = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?"
                     r"(?P<length>hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?(?P<conversion>[diouxXeEfFgGaAcspnvqwTtb%])")
_BRACE = re.compile(r"\{\{|\}\}|\{(?P<spec>[^{}]*)\}")
_STRING = r".{0,200}?"
_FIELDS = {  # field type -> (regex, sample value)
    "int": (r"[-+]?\d+", "42"),
    "uint": (r"\d+", "7"),
    "octal": (r"[0-7]+", "17"),
    "hex": (r"(?:0[xX])?[0-9a-fA-F]+", "1f"),
    "float": (r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)", "1.5"),
    "char": (r".", "x"),
    "pointer": (r"0[xX][0-9a-fA-F]+|\(nil\)|<nil>|nil", "0x7f3a2c00"),
    "bool": (r"true|false", "true"),
    "quoted": (r"\\?\".{0,200}?\\?\"|`.{0,200}?`", '"sample"'),
    "string": (_STRING, "sample-value"),
}
_PRINTF_TYPES = {"d": "int", "i": "int", "u": "uint", "o": "octal", "x": "hex", "X": "hex", "e": "float",
                 "E": "float", "f": "float", "F": "float", "g": "float", "G": "float", "a": "float", "A": "float",
                 "c": "char", "p": "pointer", "t": "bool", "q": "quoted", "b": "uint"}
_WORD = re.compile(r"[A-Za-z0-9]")


class Piece(NamedTuple):
    """A literal run of a format (kind "literal", its text) or a variable field (kind = its type)."""

    kind: str
    text: str


class FormatError(ValueError):
    """A format string that cannot be read in its declared style."""


def pieces(format_text: str, style: str) -> list[Piece]:
    """The literal runs and fields of format_text written in style (printf, brace or literal)."""
    if style == "literal":
        return [Piece("literal", format_text)] if format_text else []
    if style == "printf":
        return _split(format_text, _PRINTF, _printf_piece)
    if style == "brace":
        return _split(format_text, _BRACE, _brace_piece)
    raise FormatError(f"style {style!r} is not one of {', '.join(STYLES)}")


def _split(text: str, token: re.Pattern[str], read: object) -> list[Piece]:
    found: list[Piece] = []
    at = 0
    for match in token.finditer(text):
        _literal(found, text[at:match.start()])
        found.append(read(match))  # type: ignore[operator]
        at = match.end()
    _literal(found, text[at:])
    if token is _BRACE and re.search(r"[{}]", token.sub("", text)):
        raise FormatError(f"unbalanced brace in {text!r} (a literal brace is written {{{{ or }}}})")
    return _joined(found)


def _literal(found: list[Piece], text: str) -> None:
    if text:
        found.append(Piece("literal", text))


def _joined(found: list[Piece]) -> list[Piece]:
    """Adjacent literal runs as one."""
    joined: list[Piece] = []
    for piece in found:
        if joined and piece.kind == "literal" and joined[-1].kind == "literal":
            joined[-1] = Piece("literal", joined[-1].text + piece.text)
        else:
            joined.append(piece)
    return joined


def _printf_piece(match: re.Match[str]) -> Piece:
    conversion = match.group("conversion")
    if conversion == "%":
        return Piece("literal", "%")
    return Piece(_PRINTF_TYPES.get(conversion, "string"), match.group(0))


def _brace_piece(match: re.Match[str]) -> Piece:
    token = match.group(0)
    if token in ("{{", "}}"):
        return Piece("literal", token[0])
    spec = (match.group("spec") or "").partition(":")[2]
    kind = "hex" if spec.rstrip("?").endswith(("x", "X")) else "int" if spec.endswith(("d", "b", "o")) else (
        "float" if spec.endswith(("e", "f", "g", "%")) else "string")
    return Piece(kind, token)


def _literal_regex(text: str) -> str:
    """Escaped literal text: whitespace runs flexible, quotes and backslashes as a wrapper may escape them."""
    out: list[str] = []
    for part in re.split(r"(\s+)", text):
        if not part:
            continue
        if part.isspace():
            out.append(r"\s*")
            continue
        for char in part:
            if char == '"':
                out.append(r'\\{0,3}"')
            elif char == "\\":
                out.append(r"\\{1,4}")
            else:
                out.append(re.escape(char))
    return "".join(out)


def _trimmed(parts: list[Piece]) -> list[Piece]:
    """parts without string fields at either end (a search allows any text there anyway)."""
    start, end = 0, len(parts)
    while start < end and parts[start].kind == "string":
        start += 1
    while end > start and parts[end - 1].kind == "string":
        end -= 1
    return parts[start:end]


def format_regex(parts: list[Piece], prefix: str = "", prefix_required: bool = False) -> str:
    """The regex text matching a message made from parts, with the program's prefix before it (optional unless
    prefix_required), anywhere in a longer line; words at its ends do not match inside longer words."""
    kept = _trimmed(parts)
    body = "".join(_literal_regex(p.text) if p.kind == "literal" else f"(?:{_FIELDS[p.kind][0]})" for p in kept)
    starts_word = bool(kept) and kept[0] is parts[0] and kept[0].kind == "literal" and bool(_WORD.match(kept[0].text))
    ends_word = bool(kept) and kept[-1] is parts[-1] and kept[-1].kind == "literal" and bool(
        _WORD.match(kept[-1].text[-1]))
    if prefix.strip():
        body = f"(?:{_literal_regex(prefix.rstrip())}\\s*){'' if prefix_required else '?'}{body}"
        starts_word = bool(_WORD.match(prefix)) if prefix_required else starts_word
    return (r"(?<![A-Za-z0-9])" if starts_word else "") + body + (r"(?![A-Za-z0-9])" if ends_word else "")


def sample_line(parts: list[Piece], prefix: str = "") -> str:
    """A message the program could print from parts: each field filled with a plausible value of its type."""
    return prefix + "".join(p.text if p.kind == "literal" else _FIELDS[p.kind][1] for p in parts)


def literal_length(parts: list[Piece], prefix: str = "") -> int:
    """How specific a format is: its literal characters that are not whitespace (plus a required prefix's)."""
    return sum(len(re.sub(r"\s+", "", p.text)) for p in parts if p.kind == "literal") + len(re.sub(r"\s+", "",
                                                                                                  prefix))


def needle(parts: list[Piece], prefix: str = "") -> str:
    """The longest literal word run a match must contain, casefolded, without whitespace (what a prefilter looks
    for in a line folded the same way); quotes and backslashes end a run (a wrapper may escape them)."""
    runs = [run for p in parts if p.kind == "literal" for run in re.split(r'["\\]', re.sub(r"\s+", "", p.text))]
    runs += re.split(r'["\\]', re.sub(r"\s+", "", prefix))
    return max(runs, key=len, default="").casefold()
