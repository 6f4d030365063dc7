"""The runner: hosts in parallel (`run.run_playbook`), steps in order per host (`host_run.HostRun`).

Import what you use from its module (`from gpunode.runner.run import run_playbook`): `runner.early` must not wait for
the host-run code to import, so this package imports nothing itself.
"""
