"""`--tags` / `--skip-tags`: run only some of a playbook's steps, chosen by their `tags:`."""

from __future__ import annotations

import dataclasses

from gpunode.errors import UsageError
from gpunode.playbook.load import Playbook

ALWAYS = "always"  # a step tagged `always` runs whatever --tags says (unless --skip-tags names it)


def split_tags(values: list[str] | str | None) -> list[str]:
    """`--tags a,b --tags c` -> [a, b, c]; a value that names no tag at all (`--tags ,`) is refused: running the
    whole playbook instead of a selection is never what was meant."""
    items = [values] if isinstance(values, str) else values or []
    tags = [t.strip() for item in items for t in item.split(",") if t.strip()]
    if items and not tags:
        raise UsageError(f"no tag in {', '.join(repr(i) for i in items)}", source="--tags/--skip-tags",
                         fix="name at least one tag, e.g. --tags docker,runtime (gpunode playbooks lists them)")
    return tags


def select_steps(book: Playbook, tags: list[str], skip_tags: list[str]) -> Playbook:
    """The playbook with only the selected steps; a tag no step carries is an error, never ignored."""
    if not tags and not skip_tags:
        return book
    known = book.tags
    for option, names in (("--tags", tags), ("--skip-tags", skip_tags)):
        unknown = [t for t in names if t not in known and t != ALWAYS]
        if unknown:
            raise UsageError(f"no step of {book.path} has the tag {unknown[0]!r}", source=option,
                             fix=f"tags in this playbook: {', '.join(known)}" if known else
                             "this playbook tags no step: add `tags: [NAME]` to steps or includes")
    steps = [s for s in book.steps if _selected(s.tags, tags, skip_tags)]
    if not steps:
        raise UsageError("--tags/--skip-tags leave no step to run", source="--tags",
                         fix=f"tags in this playbook: {', '.join(known)}")
    return dataclasses.replace(book, steps=steps)


def _selected(step_tags: list[str], tags: list[str], skip_tags: list[str]) -> bool:
    if any(t in skip_tags for t in step_tags):
        return False
    return not tags or ALWAYS in step_tags or any(t in tags for t in step_tags)
