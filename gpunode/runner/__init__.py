"""The runner: hosts in parallel, steps in order per host."""

from gpunode.runner.run import RunOptions, default_log_dir, run_playbook

__all__ = ["RunOptions", "run_playbook", "default_log_dir"]
