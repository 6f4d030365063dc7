"""Hide secret variables (passwords, tokens, keys) in anything printed."""

from __future__ import annotations

import re
from typing import Any

MASK = "********"

_SECRET_WORDS = re.compile(r"pass|secret|token|credential|api_?key|private_key(?!_file)", re.IGNORECASE)
_PEM_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def is_secret_key(name: str) -> bool:
    """True for variable names that look like they hold a secret (ansible_ssh_pass, aws_secret_key, ...)."""
    return bool(_SECRET_WORDS.search(str(name)))


def redacted_vars(variables: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``variables`` with secret-looking keys and PEM private keys (also nested) as ``MASK``."""
    return {key: _redact(key, value) for key, value in variables.items()}


def _redact(key: Any, value: Any) -> Any:
    if is_secret_key(key) and value not in (None, ""):
        return MASK
    if isinstance(value, str) and _PEM_KEY.search(value):
        return MASK
    if isinstance(value, dict):
        return redacted_vars(value)
    if isinstance(value, list):
        return [redacted_vars(item) if isinstance(item, dict) else item for item in value]
    return value
