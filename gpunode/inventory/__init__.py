"""Ansible-compatible inventories: YAML/INI files, group_vars/host_vars, host patterns, ad-hoc host lists."""

from gpunode.inventory.adhoc import adhoc_inventory
from gpunode.inventory.loader import load_inventory
from gpunode.inventory.model import Group, Host, Inventory
from gpunode.inventory.secrets import MASK, is_secret_key, redacted_vars

__all__ = [
    "MASK",
    "Group",
    "Host",
    "Inventory",
    "adhoc_inventory",
    "is_secret_key",
    "load_inventory",
    "redacted_vars",
]
