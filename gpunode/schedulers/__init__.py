"""Scheduler hooks: drain a node before a change, return it after (Slurm)."""
