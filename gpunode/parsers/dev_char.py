"""The /dev/char check's lines (gpunode/_scripts/dev_char_links.sh): `node PATH MAJOR:MINOR ok|missing|wrong`."""

from __future__ import annotations


def link_states(output: str) -> dict[str, tuple[str, str]]:
    """{device path: (major:minor, state)} from the script's `node` lines; other lines are ignored."""
    found = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "node":
            found[parts[1]] = (parts[2], parts[3])
    return found


def link_problems(output: str) -> list[str]:
    """One line per NVIDIA device whose /dev/char link is missing or leads elsewhere."""
    return [f"/dev/char/{mm} {'is missing' if state == 'missing' else 'does not lead to ' + path} (for {path})"
            for path, (mm, state) in sorted(link_states(output).items()) if state != "ok"]
