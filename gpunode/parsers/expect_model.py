"""A benchmark output's own GPU name against `--expect-model`: say so when they name different models."""

from __future__ import annotations

import re

from gpunode.parsers.catalogs.gpu_models import identify
from gpunode.parsers.model import Finding


def _tokens(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.strip().upper())


def disagree(named: str | None, expected: str | None) -> bool:
    """Whether the GPU name an output prints and the expected model name different catalogued models. A family name
    ("H100") agrees with every model whose names hold it as a whole word; a GPU name gpunode does not catalogue
    (an RTX 4090) never disagrees: `--expect-model` is then how a user picks the reference."""
    actual = identify(named)
    if actual is None or not expected:
        return False
    wanted = identify(expected)
    if wanted is not None:
        return wanted.key != actual.key
    word = re.compile(r"(?<![A-Z0-9])" + re.escape(_tokens(expected)) + r"(?![A-Z0-9])")
    return not any(word.search(_tokens(n)) for n in (str(named), actual.label, *actual.names, *actual.aliases))


def model_mismatch(tool: str, named: str | None, expected: str | None) -> list[Finding]:
    """A warning when the output's GPU and `--expect-model` disagree (the expected model's reference is used)."""
    if not disagree(named, expected):
        return []
    return [Finding(f"{tool}-model-mismatch", "warning",
                    f"{tool}: the output names {named}, but --expect-model says {expected}: judged against "
                    f"{expected}'s reference", f"GPU named by the output: {named}",
                    "Check that this output came from the node you meant; give --expect-model naming the GPUs that "
                    "ran it, or leave it out (the output's own GPU name then picks the reference).")]
