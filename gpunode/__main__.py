"""`python -m gpunode` = the `gpunode` console script."""

from gpunode.tasks import main

main()
