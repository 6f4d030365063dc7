"""Schedulers a GPU node belongs to (Slurm, Kubernetes): taking it out before a change that disturbs its GPUs and
putting it back after, as a rolling run needs (runner/rolling.py)."""
