"""Close an `nvidia-smi -q -x` document that a paste cut off, so what it did show can be read."""

from __future__ import annotations

import re

_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)[^<>]*?(/?)>")
_DTD_END = re.compile(r"<!DOCTYPE[^\[>]*(?:\[.*?\]\s*)?>", re.S)


def close_truncated(text: str) -> str | None:
    """text with the tags still open at its cut closed (the half-written last tag or value dropped), or None when
    it is not a cut document (it has its closing `</nvidia_smi_log>`, or no `<nvidia_smi_log>` at all) or was cut
    before any element of a `<gpu>` was complete."""
    if "</nvidia_smi_log>" in text or "<nvidia_smi_log" not in text:
        return None
    cut = text[:text.rfind(">") + 1]
    dtd = _DTD_END.search(cut)
    body_start = dtd.end() if dtd else 0
    stack: list[str] = []
    for match in _TAG.finditer(cut, body_start):
        closing, name, empty = match.groups()
        if empty or match.group(0).startswith(("<?", "<!")):
            continue
        if closing:
            if name in stack:
                del stack[len(stack) - 1 - stack[::-1].index(name):]
        else:
            stack.append(name)
    gpu = cut.find("<gpu ", body_start) if "<gpu " in cut else cut.find("<gpu>", body_start)
    if not stack or gpu == -1 or re.search(r"</\w+>", cut[gpu:]) is None:
        return None  # nothing of a GPU was written before the cut: not worth reading
    return cut + "".join(f"</{name}>" for name in reversed(stack))
