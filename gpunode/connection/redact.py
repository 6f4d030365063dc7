"""Keep secrets (passwords, tokens) out of logs, transcripts and reports."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "********"
SECRET_NAME = re.compile(r"(pass(word)?|secret|token|private_key(?!_file)|api_key|access_key)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True for variable names that hold secrets (ansible_become_pass, aws_secret_access_key, ...)."""
    return bool(SECRET_NAME.search(name))


class Redactor:
    """Replaces every known secret value in text with a mask."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(str(value)) >= 3:
                self._secrets.add(str(value))

    def add_from_vars(self, variables: Mapping[str, Any]) -> None:
        """Treat the values of secret-looking variables as secrets."""
        for name, value in variables.items():
            if is_secret_name(str(name)) and isinstance(value, str | int):
                self.add(str(value))

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text
