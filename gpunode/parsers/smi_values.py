"""Normalise nvidia-smi field values: "N/A", units, booleans, PCI bus ids."""

from __future__ import annotations

import re

# Values that mean "no value" in nvidia-smi output (XML, -q text, table, CSV).
NOT_AVAILABLE = frozenset(
    {
        "",
        "N/A",
        "[N/A]",
        "Not Supported",
        "[Not Supported]",
        "Not Found",
        "Requested functionality has been deprecated",
        "[Requested functionality has been deprecated]",
        "Insufficient Permissions",
        "[Insufficient Permissions]",
    }
)

# Values that mean "NVML tried and failed": worth a finding, never a number.
# nvidia-smi prints nvmlErrorString() of the failed call, bracketed in CSV output.
UNKNOWN_ERROR = frozenset({"Unknown Error", "[Unknown Error]", "ERR!", "GPU requires reset",
                           "[GPU requires reset]", "GPU is lost", "[GPU is lost]"})

# Of those, the ones that say the GPU itself is gone or must be reset (critical, not a transient read error).
GPU_LOST = frozenset({"GPU requires reset", "[GPU requires reset]", "GPU is lost", "[GPU is lost]"})

_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")
_TRUE = frozenset({"enabled", "yes", "on", "active", "true", "valid"})
_FALSE = frozenset({"disabled", "no", "off", "not active", "false", "invalid"})
_BUS_ID = re.compile(
    r"(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?"
)


def clean(value: str | None) -> str | None:
    """Stripped value, or None when nvidia-smi says it is unavailable or failed."""
    if value is None:
        return None
    text = value.strip()
    if text in NOT_AVAILABLE or text in UNKNOWN_ERROR:
        return None
    return text


def is_gpu_lost(value: str | None) -> bool:
    """True for "GPU requires reset" / "GPU is lost" values (bracketed in CSV)."""
    return value is not None and value.strip() in GPU_LOST


def is_unknown_error(value: str | None) -> bool:
    """True for values like "Unknown Error" / "ERR!" (NVML failed to read the field)."""
    return value is not None and value.strip() in UNKNOWN_ERROR


def to_float(value: str | None) -> float | None:
    """Leading number of a value such as "67.03 W" or "13 C"; None if absent."""
    text = clean(value)
    if text is None:
        return None
    match = _NUMBER.match(text)
    return float(match.group(0)) if match else None


def to_int(value: str | None) -> int | None:
    """Leading integer of a value such as "81920 MiB", "16x", "0x06" (hex only with 0x)."""
    text = clean(value)
    if text is None:
        return None
    if text.lower().startswith("0x"):
        try:
            return int(text, 16)
        except ValueError:
            return None
    number = to_float(text)
    return int(number) if number is not None else None


def to_bool(value: str | None) -> bool | None:
    """Enabled/Yes/On/Active -> True, Disabled/No/Off/Not Active -> False, else None."""
    text = clean(value)
    if text is None:
        return None
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


def first_token(value: str | None) -> str | None:
    """First word of a value: "610.57.04 [Deprecated; ...]" -> "610.57.04"."""
    text = clean(value)
    return text.split()[0] if text else None


def normalize_bus_id(value: str | None) -> str | None:
    """Canonical "dddd:bb:dd.f" (lowercase, 4-hex domain); "dddd:bb:dd" when no function is given.

    Accepts nvidia-smi ("00000000:06:00.0"), lspci ("06:00.0"), kernel ("PCI:0000:38:00") forms.
    """
    if not value:
        return None
    match = _BUS_ID.search(value.strip())
    if not match:
        return None
    domain = (match.group("domain") or "0").lower().lstrip("0").rjust(4, "0")[-8:]
    text = f"{domain}:{match.group('bus').lower()}:{match.group('dev').lower()}"
    return f"{text}.{match.group('fn')}" if match.group("fn") is not None else text


def same_device(a: str | None, b: str | None) -> bool:
    """True if two bus ids name the same device (function ignored when one side lacks it)."""
    left, right = normalize_bus_id(a), normalize_bus_id(b)
    if left is None or right is None:
        return False
    return left.split(".")[0] == right.split(".")[0]
