"""Playbooks: YAML files of steps with Jinja2 variables."""

from gpunode.playbook.load import Playbook, StepSpec, load_playbook
from gpunode.playbook.template import TemplateError, evaluate, render

__all__ = ["Playbook", "StepSpec", "load_playbook", "render", "evaluate", "TemplateError"]
