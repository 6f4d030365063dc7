"""Kernel-log text in any common form -> logical messages (one per kernel message, continuations joined).

Handles dmesg raw / -T / --time-format iso, `journalctl -k` short / short-iso / short-precise / json,
dmesg -H / -e (--reltime: a "[Nov28 00:01] " line when the minute changes, "[  +0.000844] " deltas between),
dmesg -d / --time-format delta / ctime,delta (a "<    0.000012>" delta beside the stamp, or alone) and the
"[T123] " / "[C3] " caller id that dmesg prints behind the stamp on kernels with CONFIG_PRINTK_CALLER,
syslog / kern.log / messages prefixes (incl. rsyslog's `#012` for embedded newlines) and multi-line NVRM
messages whose continuation lines carry no timestamp (or repeat the first line's timestamp).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

# Prefixes in front of the message text, tried in order; group "ts" is the timestamp when there is one.
_PREFIXES = (
    re.compile(r"^\d+,\d+,(?P<ts>\d+),[-c+][^;]*;"),  # /dev/kmsg records: "6,3964,206764307,-;msg"
    re.compile(r"^<\d>\[\s*(?P<ts>\d+\.\d+)\]\s?"),  # dmesg -r / pstore: "<6>[  201.65] msg"
    re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[,.]?\d*(?:[+-]\d{2}:?\d{2}|Z)?)\s+\S+\s+kernel:\s?"),
    re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[,.]?\d*(?:[+-]\d{2}:?\d{2}|Z)?)\s+"),
    re.compile(r"^(?P<ts>[A-Z][a-z]{2} +\d+ \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+\S+\s+kernel:\s?"),
    re.compile(r"^\S+: kern:\s+\w+: \[(?P<ts>[^\]]+)\]:\s?"),  # Talos: "host: kern: warning: [iso]: msg"
    re.compile(r"^[a-z]+\s*:\s*[a-z]+\s*:\s*\[(?P<ts>[^\]]+)\]\s?"),  # dmesg --decode
    re.compile(r"^[a-z]+\s*:\s*[a-z]+\s*:\s*(?P<ts>\d{4}-\d{2}-\d{2}T\S+)\s"),  # dmesg -x --time-format iso
    # The forms util-linux's dmesg prints (sys-utils/dmesg.c @ 39465c780eed56034ed1440068a2722fc3331343):
    # --ctime "[%s] " of strftime "%a %b %e %H:%M:%S %Y" (line 1076, 1209); ctime,delta "[%s <%12.06f>] " (1213);
    # delta "[<%12.06f>] " (1218); reltime (-H, -e) "[%s] " of strftime "%b%e %H:%M" when the minute changes
    # (1086, 1227), else "[  %+8.06f] " / "[ %+9.06f] " (1233, 1236); time "[%5ld.%06ld] " (1242); time,delta
    # "[%5ld.%06ld <%12.06f>] " (1247).
    re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d{2}:\d{2}:\d{2} \d{4})(?: <\s*[\d.]+>)?\]\s?"),
    re.compile(r"^\[\s*(?P<ts>\d+\.\d+)(?: <\s*[\d.]+>)?\]\s?"),
    re.compile(r"^\[\s*(?P<ts>[+-]\d+\.\d+)\]\s?"),  # dmesg -H / --reltime: "[  +0.000012] msg"
    re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} ?\d{1,2} \d{2}:\d{2})\]\s?"),  # dmesg -H's minute line: "[Nov28 00:01] "
    re.compile(r"^\[<\s*(?P<ts>\d+\.\d+)>\]\s?"),  # dmesg --time-format delta: "[<    0.000012>] msg"
    re.compile(r"^kernel:\s?"),
)
_MICROSECONDS = re.compile(r"\.\d{6}")
_INNER_MONOTONIC = re.compile(r"^\[\s*(?P<ts>\d+\.\d+)\]\s?")
_CALLER = re.compile(r"^\[\s*[TC]\d+\]\s?")  # printk caller id behind the stamp: "[T1234] " (task) / "[C3] " (CPU)


@dataclass
class KernelMessage:
    """One kernel message: its text without prefixes, its timestamp, and the raw line(s) it came from."""

    text: str
    timestamp: str | None
    raw: str
    clock: str | None = None  # the most precise time of the line (dmesg's monotonic one when there are two)


def _split_prefix(line: str) -> tuple[str | None, str | None, str, bool]:
    """(timestamp, most precise timestamp, message, had_prefix) for one physical line."""
    for pattern in _PREFIXES:
        match = pattern.match(line)
        if match:
            ts = clock = match.groupdict().get("ts")
            rest = line[match.end():]
            inner = _INNER_MONOTONIC.match(rest)  # "kernel: [ 885.24] NVRM: ..." (syslog of dmesg time)
            if inner:
                clock, rest = inner.group("ts"), rest[inner.end():]
                ts = ts or clock
            caller = _CALLER.match(rest)
            return ts, clock, rest[caller.end():] if caller else rest, True
    return None, None, line, False


def _journal_json(line: str) -> str | None:
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    message = record.get("MESSAGE") if isinstance(record, dict) else None
    if isinstance(message, list):  # journalctl -o json prints non-UTF-8 messages as byte arrays
        message = bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
    return message if isinstance(message, str) else None


def kernel_messages(text: str) -> list[KernelMessage]:
    """Logical kernel messages of text, NVRM continuation lines joined to the message they continue.

    The result is kept for the last few texts (diagnose reads one log several times): do not modify it.
    """
    return list(_kernel_messages(text))


@lru_cache(maxsize=4)
def _kernel_messages(text: str) -> tuple[KernelMessage, ...]:
    """kernel_messages(text), computed once per text."""
    physical: list[str] = []
    lines = text.splitlines()
    indent = min((len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()), default=0)
    for line in (line[indent:] for line in lines):  # a log indented as a whole (a quoted block): not continued
        message = _journal_json(line.strip())
        physical.extend((message if message is not None else line).split("#012"))
    messages: list[KernelMessage] = []
    for raw in physical:
        if not raw.strip():
            continue
        ts, clock, body, had_prefix = _split_prefix(raw.strip() if raw[:1] in " \t" else raw)
        body = body.strip()
        previous = messages[-1] if messages else None
        if previous is not None and _continues(previous, raw, clock, had_prefix, body):
            previous.text = f"{previous.text} {_strip_nvrm(body)}".strip()
            previous.raw += "\n" + raw
            continue
        messages.append(KernelMessage(body, ts, raw, clock))
    return tuple(messages)


def _continues(previous: KernelMessage, raw: str, clock: str | None, had_prefix: bool, body: str) -> bool:
    """Whether an NVRM line continues the previous NVRM message.

    Indented lines do (the kernel prints continuations that way); a bare "NVRM:" line without a prefix, or
    one repeating the previous line's microsecond timestamp, does when the previous text did not end a
    sentence. Lines with second-resolution times (dmesg -T, syslog) are separate messages even in one second.
    """
    if not body.startswith("NVRM:") or not previous.text.startswith("NVRM:"):
        return False
    if raw[:1] in " \t":
        return True
    if _ends_message(previous.text):
        return False
    if clock is not None and clock[:1] in "+-":  # dmesg -H: the delta to the line before; +0.000000 = same time
        return float(clock) == 0
    return not had_prefix or (clock is not None and clock == previous.clock and _MICROSECONDS.search(clock) is not None)


def _ends_message(text: str) -> bool:
    return text.rstrip().endswith(("!", ".", ")", "`"))


def _strip_nvrm(body: str) -> str:
    return body[len("NVRM:"):].strip() if body.startswith("NVRM:") else body
