"""Playbooks: YAML files of steps with Jinja2 variables; built-in ones by name, includes, tags."""

from gpunode.playbook.builtin import builtin_names, builtin_path, resolve_playbook
from gpunode.playbook.load import Playbook, StepSpec, load_playbook
from gpunode.playbook.tags import select_steps, split_tags
from gpunode.playbook.template import TemplateError, evaluate, render, resolve_variables

__all__ = ["Playbook", "StepSpec", "load_playbook", "render", "evaluate", "TemplateError", "builtin_names",
           "builtin_path", "resolve_playbook", "select_steps", "split_tags",
           "resolve_variables"]
