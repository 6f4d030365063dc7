"""`python -m gpunode` = the `gpunode` console script."""

from gpunode.tasks import console_main

console_main()
