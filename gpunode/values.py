"""How YAML and INI values are read, the way Ansible reads them: booleans from words, file modes from numbers.

The one place that decides truthiness (`when:`, boolean step arguments, `become`) and what an unquoted
`mode: 0644` (YAML reads the integer 420) means, so every step and every condition agree.
"""

from __future__ import annotations

import re
from typing import Any

TRUE_WORDS = frozenset({"true", "yes", "y", "on", "1", "t"})
FALSE_WORDS = frozenset({"false", "no", "n", "off", "0", "f", ""})


def as_bool(value: Any) -> bool | None:
    """A boolean from a YAML/INI value (`true`, "no", "off", 1, "0"...); None when it is not one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE_WORDS:
            return True
        if text in FALSE_WORDS:
            return False
    return None


def kind_of(value: Any, json: bool = False) -> str:
    """What a value is, in the words of YAML (or JSON) rather than Python's internal type names (LineList)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean" if json else "true/false"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array" if json else "list"
    if isinstance(value, dict):
        return "object" if json else "mapping"
    return "date" if type(value).__name__ in ("date", "datetime") else "value of another kind"


def cache_folder(value: Any) -> str | None:
    """A cache setting (`module_cache`, `package_cache`) as a folder: None when it is off (false, "off", "no", "0",
    "none", null), "" for the default folder (true, "yes", "on", "1", or empty), else the folder named. The words are
    read as booleans because an INI inventory (`package_cache=true`) or a quoted YAML value gives them as strings,
    which must not become a folder called `true` in the current directory."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return ""
    if text.lower() == "none":
        return None
    word = as_bool(value)
    if word is not None:
        return "" if word else None
    return text


def misspelt_bool(text: str) -> bool:
    """`flase`, `ture`, `Fasle`: not a boolean word but close to true/false (a typo that would count as true)."""
    import difflib

    word = text.strip().lower()
    if not word or as_bool(word) is not None:
        return False
    swapped = any(sorted(word) == sorted(b) for b in ("true", "false"))  # letters transposed
    return swapped or bool(difflib.get_close_matches(word, ("true", "false"), 1, 0.8))


def truthy(value: Any) -> bool:
    """Ansible's truthiness for a `when:` result: the strings "false", "no", "0", "off" are false."""
    word = as_bool(value) if isinstance(value, str) else None
    return word if word is not None else bool(value)


def bool_filter(value: Any) -> bool:
    """Ansible's `| bool` filter: true only for true, "yes", "on", "1", "true" (any case) and 1."""
    return as_bool(value) is True


def file_mode(value: Any, where: str) -> str:
    """A permission mode as octal digits ("644").

    A string is octal as written ("0644", "644"). An integer is the number YAML parsed: `mode: 0644`
    unquoted is 420 == 0o644 (as in Ansible). An integer above 0o777 (setuid/setgid/sticky bits) is refused,
    because it is nearly always a decimal `mode: 644` meant as octal; quote it to mean it.
    """
    if isinstance(value, bool):
        raise ValueError(f"{where} must be an octal mode like '0644', got {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= 0o777:
            raise ValueError(
                f"{where}: the unquoted number {value} means mode {value:o} (with setuid/setgid/sticky bits); "
                f"quote the mode, e.g. '0{value}', to say which one you mean")
        return format(value, "o")
    text = str(value).strip()
    if not re.fullmatch(r"0?[0-7]{3,4}", text):
        raise ValueError(f"{where} must be an octal mode like '0644', got {value!r}")
    return format(int(text, 8), "o")
