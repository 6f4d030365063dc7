"""Invoke tasks for gpunode (`invoke --list`). The same tasks are the `gpunode` console script."""

from gpunode.tasks import ns  # noqa: F401 - invoke looks for `ns`
