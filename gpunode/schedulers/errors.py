"""What a scheduler's drain raises when it could not begin (kept apart: the drainers and the runner import it)."""

from __future__ import annotations

from gpunode.errors import GpunodeError


class NotDrained(GpunodeError):
    """The drain could not begin (no `scontrol` on the host, no readable kubeconfig on the controller): the node was
    never taken out, so there is nothing to resume."""
