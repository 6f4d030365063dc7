"""Large kernel logs: the speed-ups (one scan, regex prefilters, block joins) change no result.

A real capture repeated to a few MB gives the findings of the capture alone; the word prefilters of
regex_needles give, over the whole corpus, exactly what running every regex on every text gives.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from gpunode.parsers import errors_text, kernel_log
from gpunode.parsers.catalogs.kernel_conditions import CONDITIONS
from gpunode.parsers.errors_text import classify_errors
from gpunode.parsers.kernel_lines import kernel_messages
from gpunode.parsers.kernel_log import scan_kernel_log
from gpunode.parsers.model import Finding
from gpunode.parsers.regex_needles import ASCII_TWINS, candidates, fold, needles, without_space
from gpunode.verify import diagnose_files
from gpunode.verify.captures.blocks import split_blocks

DATA = Path(__file__).resolve().parent / "data"
CAPTURES = [DATA / "captures" / "dmesg" / "gpud__dmesg-with-xid-119.log",
            DATA / "captures" / "dmesg" / "gpud__memory-dmesg.decode.iso.log",
            DATA / "captures" / "dmesg" / "gpud__dmesg.txt"]  # the last: no finding, many non-NVIDIA lines
_SIZE = 3_000_000


def _corpus() -> list[str]:
    """Every capture of tests/data as text (binary ones decoded leniently)."""
    return [path.read_bytes().decode("utf-8", "replace") for path in sorted(DATA.rglob("*")) if path.is_file()]


def _comparable(findings: list[Finding], copies: int = 1) -> list[tuple[str, ...]]:
    """Findings without their evidence text (it quotes counts), event counts multiplied by copies."""
    def scaled(summary: str) -> str:
        return re.sub(r"(\d+) event\(s\)", lambda m: f"{int(m[1]) * copies} event(s)", summary)
    return [(f.id, f.severity, scaled(f.summary), f.remedy, f.gpu or "") for f in findings]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda path: path.name)
def test_capture_repeated_to_megabytes_gives_the_same_findings(capture: Path, tmp_path: Path) -> None:
    text = capture.read_text()
    copies = _SIZE // len(text) + 1
    big = tmp_path / "big.log"
    big.write_text((text.rstrip("\n") + "\n") * copies)
    alone, repeated = diagnose_files([capture]), diagnose_files([big])
    assert _comparable(repeated.findings) == _comparable(alone.findings, copies)
    assert repeated.healthy == alone.healthy
    single, many = scan_kernel_log(text), scan_kernel_log(big.read_text())
    assert many.xid_counts() == {code: n * copies for code, n in single.xid_counts().items()}
    assert {c.id for c, _ in many.conditions} == {c.id for c, _ in single.conditions}


def test_kernel_conditions_prefilter_matches_running_every_regex() -> None:
    for text in _corpus():
        messages = [message.text for message in kernel_messages(text)]
        brute = [(i, c) for i, message in enumerate(messages) for c in CONDITIONS if c.pattern.search(message)]
        assert kernel_log._matches(messages) == brute


def test_error_signature_prefilter_matches_running_every_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _corpus()
    fast = [classify_errors(text) for text in corpus]
    monkeypatch.setattr(errors_text, "_NEEDLES", {})
    monkeypatch.setattr(errors_text, "needles", lambda pattern, spaceless=False: None)
    assert [classify_errors(text) for text in corpus] == fast


def test_joined_blocks_keep_every_piece() -> None:
    text = CAPTURES[0].read_text()
    lines = text.splitlines()
    spaced = "\n\n".join("\n".join(lines[i:i + 5]) for i in range(0, len(lines), 5))
    blocks = split_blocks(spaced)
    assert [block.kind for block in blocks] == ["kernel-log"]
    assert blocks[0].text == spaced


def test_every_signature_has_words_to_look_for() -> None:
    """Without derivable words a pattern runs on every line again (slow, not wrong): keep them derivable."""
    assert all(needles(c.pattern) for c in CONDITIONS)
    assert all(needles(s.pattern) and needles(errors_text._loose(s.pattern), spaceless=True)
               for s in errors_text.SIGNATURES)


def test_needles_are_ascii_casefolded_literals() -> None:
    assert needles(re.compile(r"NVRM: Xid \(PCI:[^)]*\): \d+")) == ("nvrm: xid (pci:",)
    assert needles(re.compile(r"(?:GPU )?has fallen|AER: Corrected", re.I)) == ("has fallen", "aer: corrected")
    assert needles(re.compile(r"a\s*b")) is None
    assert needles(re.compile(r"Failed\s*to\s*init"), spaceless=True) == ("failedtoinit",)


def test_unicode_twins_of_ascii_letters_still_reach_the_regex() -> None:
    pattern = re.compile(r"NVIDIA probe routine", re.I)
    for text in ("NV\u0131DIA probe routine", "NV\u0130DIA probe routine", "NVIDIA probe routine"):
        assert pattern.search(text)
        assert candidates([text], [needles(pattern)]) == [{0}]
    assert "failedto" in without_space(fold("Fa\u0131led \t to"))


def test_ascii_twins_table_is_what_unicode_says() -> None:
    """Non-ASCII characters re's IGNORECASE takes for an ASCII letter: their lowercase is ASCII, or _casefix."""
    from re import _casefix  # type: ignore[attr-defined]

    derived = {chr(c): chr(c).lower()[0] for c in range(0x80, sys.maxunicode + 1) if chr(c).lower()[0].isascii()}
    derived.update({chr(twin): chr(letter) for letter, twins in _casefix._EXTRA_CASES.items() if letter < 0x80
                    for twin in twins})
    assert derived == ASCII_TWINS
    assert all(re.fullmatch(letter, twin, re.I) for twin, letter in ASCII_TWINS.items())
