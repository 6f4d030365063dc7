"""Cheap prefilters for regexes: the literal words a pattern cannot match without (derived, never hand-listed).

`needles(pattern)` gives casefolded substrings such that any text the pattern matches contains at least one of
them (casefolded), or None when no such words can be derived; `candidates()` then finds, with plain substring
searches over all texts at once, which of many texts may match, so the regex runs only on those.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

try:  # the parser re itself uses (private; without it every text is a candidate, which is slower but exact)
    from re import _constants as _sre_constants
    from re import _parser as _sre_parser
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

_MIN_LENGTH = 3  # shorter words would let most lines through
# Non-ASCII characters an IGNORECASE regex takes for an ASCII letter (their simple lowercase is ASCII, or
# re._casefix pairs them); tests/test_verify_large_log.py derives this table again from Unicode.
ASCII_TWINS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
_TWINS = str.maketrans(ASCII_TWINS)


def fold(text: str) -> str:
    """text casefolded so that it holds an ASCII needle wherever an IGNORECASE regex would see that word."""
    return text.casefold() if text.isascii() else text.translate(_TWINS).casefold()


def without_space(text: str) -> str:
    """text without any whitespace (what needles(..., spaceless=True) are looked for in)."""
    if text.isascii():
        for space in " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f":  # what str.isspace() and re's \s take as whitespace
            text = text.replace(space, "")
        return text
    return "".join(text.split())


def needles(pattern: re.Pattern[str], spaceless: bool = False) -> tuple[str, ...] | None:
    """Casefolded words of which every match of pattern contains one, or None if none can be derived.

    spaceless: optional whitespace (`\\s*`) and literal whitespace do not end a word; the words are then to be
    looked for in without_space(text).
    """
    if pattern.flags & re.VERBOSE:
        return None
    try:
        parsed = _sre_parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - any parser change only costs speed
        return None
    found = _sequence_needles(list(parsed), spaceless)
    return found if found and all(word.isascii() and "\n" not in word for word in found) else None


def _sequence_needles(items: list[tuple[Any, Any]], spaceless: bool) -> tuple[str, ...] | None:
    """Needles of a sequence: its longest run of literal characters, else those of a mandatory group in it."""
    best, run = "", ""
    groups: list[tuple[str, ...] | None] = []
    for op, arg in items:
        if op is _sre_constants.LITERAL:
            run += "" if spaceless and chr(arg).isspace() else chr(arg)
            continue
        if spaceless and _optional_space(op, arg):
            continue
        best, run = max(best, run, key=len), ""
        if op is _sre_constants.BRANCH:
            alternatives = [_sequence_needles(list(branch), spaceless) for branch in arg[1]]
            groups.append(None if None in alternatives else tuple(w for a in alternatives if a for w in a))
        elif op is _sre_constants.SUBPATTERN:
            groups.append(_sequence_needles(list(arg[-1]), spaceless))
    best = max(best, run, key=len)
    if len(best) >= _MIN_LENGTH:
        return (best.casefold(),)
    return next((group for group in groups if group), None)


def _optional_space(op: Any, arg: Any) -> bool:
    """Whether (op, arg) is `\\s*` or `\\s?`: optional whitespace only."""
    if op not in (_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT) or arg[0] != 0:
        return False
    body = list(arg[2])
    spaces = (_sre_constants.CATEGORY_SPACE, _sre_constants.CATEGORY_UNI_SPACE)
    return len(body) == 1 and body[0][0] is _sre_constants.IN and all(
        kind is _sre_constants.CATEGORY and value in spaces for kind, value in body[0][1])


def candidates(texts: Sequence[str], needle_sets: Sequence[tuple[str, ...] | None]) -> list[set[int] | None]:
    """For each needle set, the indexes of the texts holding one of its words (None: every text may match)."""
    folded = [fold(text) for text in texts]
    starts = [0]
    for text in folded:
        starts.append(starts[-1] + len(text) + 1)
    joined = "\n".join(folded)
    return [None if words is None else indexes_holding(joined, starts, words) for words in needle_sets]


def indexes_holding(joined: str, starts: list[int], words: tuple[str, ...]) -> set[int]:
    """Indexes of the newline-joined texts (starting at starts) that hold one of words."""
    found: set[int] = set()
    for word in words:
        at = joined.find(word)
        while at != -1:
            index = bisect_right(starts, at) - 1
            found.add(index)
            at = joined.find(word, starts[index + 1])
    return found
