"""The one way user and remote text reaches a rich console: shown verbatim, never read as markup or emoji.

Remote output, step names, inventory names and error messages may contain `[...]` (rich markup), `:name:`
(emoji codes) or terminal control bytes (ANSI colours). Everything printed goes through `Text` objects built
here, so none of that is interpreted; control bytes are shown as `\\xNN` escapes.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # rich is imported by the functions that build Text: plain output (visible) never loads it
    from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all C0/C1 controls except \t and \n


def visible(text: object) -> str:
    """`text` with control bytes (ANSI escapes, NUL, \\r ...) written as `\\xNN`, so they print as what they are."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def literal(text: object, style: str = "") -> Text:
    """A rich Text that shows `text` exactly (no markup, no emoji, visible control bytes)."""
    from rich.text import Text

    return Text(visible(text), style=style)


def line(*parts: object) -> Text:
    """One output line from pieces: a plain value is literal text, a `(text, style)` pair is literal styled text."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(visible(part[0]), style=part[1])
        else:
            out.append(visible(part))
    return out


def say(*parts: object, stream: TextIO | None = None) -> None:
    """One plain output line (stdout unless `stream`), flushed: for output read as a log (Packer's provisioner
    output, CI), with control bytes visible as in `line`, and no rich (no markup, no wrapping)."""
    print("".join(visible(part) for part in parts), file=stream or sys.stdout, flush=True)
