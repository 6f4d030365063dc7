"""What every task group shares: the task class (explicit short flags), the common help texts and the checks of
number options."""

from __future__ import annotations

from typing import ClassVar

from invoke import Collection, task
from invoke.tasks import Task

from gpunode.clihelp import HELP_FLAGS
from gpunode.errors import UsageError


class GTask(Task):
    """A task whose short flags are given explicitly (`-i` inventory, `-H` hosts) instead of guessed."""

    SHORT = {"inventory": "i", "hosts": "H", "limit": "l", "check": "C", "forks": "f", "verbose": "v",
             "extra_vars": "e", "ask_become_pass": "K"}

    def arg_opts(self, name, default, taken_names):  # type: ignore[override]
        opts = super().arg_opts(name, default, taken_names)
        opts["names"] = [opts["names"][0]] + ([self.SHORT[name]] if name in self.SHORT else [])
        if name in self.FLAGS:  # a flag with a third state, "not given" (None): e.g. --container-test
            opts.update(kind=bool, default=None)
        return opts

    FLAGS = {"container_test", "no_container_test"}
    namespace: ClassVar[Collection | None] = None  # the collection of the tasks (gpunode/tasks.py sets it): for --help

    def get_arguments(self, ignore_unknown_help=None):  # type: ignore[no-untyped-def]
        """Invoke pops each help text as it makes the arguments: keep them for the next call (`missing_values()`,
        then the parser, then `--help` all ask), or the help printed options without their descriptions."""
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        """`invoke verify-gpu --help`: Invoke takes `--help` for the missing host; print the task's help instead."""
        if any(kwargs.get(name) in HELP_FLAGS for name in self.positional):
            from gpunode.clihelp import binary_name, print_task_help

            print_task_help(self.namespace, self, binary_name())
            return None
        return super().__call__(*args, **kwargs)


def gtask(*args, **kwargs):
    return task(*args, klass=GTask, auto_shortflags=False, **kwargs)


CONN_HELP = {
    "inventory": "inventory file or folder (YAML or INI, Ansible-compatible); repeatable",
    "hosts": "ad-hoc hosts: host1,user@host2:2222",
    "limit": "limit to a pattern: group, host, glob, !exclude, &intersect",
}
KEYS_HELP = {"accept_new_host_keys": "trust unknown host keys on first use (recorded in gpunode's known_hosts)"}


EXTRA_VARS_HELP = ("Ansible's extra vars: KEY=VALUE (several in one quoted argument), @FILE (YAML or JSON) or a "
                   "JSON/YAML mapping; repeatable, wins over --var")
PLAYBOOK_HELP = ("a built-in playbook by name (base, gpu-node, nfs: `gpunode playbooks`) or your own file as a path "
                 "(site.yml, ./base.yml)")


def _whole(option: str, value: object) -> int | None:
    """An optional whole-number option (None when not given); anything else is a usage error."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not text.isdigit():
        example = {"--driver-branch": 550, "--port": 22}.get(option, 8)
        raise UsageError(f"must be a whole number (0 or more), got {value!r}", source=option,
                         fix=f"e.g. {option} {example}")
    return int(text)


def _amount(option: str, value: object, default: float) -> float:
    """An optional non-negative number option."""
    if value is None or value == "":
        return default
    try:
        number = float(str(value))
    except ValueError:
        number = -1.0
    if not 0 <= number < 1e9:
        raise UsageError(f"must be a number of 0 or more, got {value!r}", source=option, fix=f"e.g. {option} 2")
    return number


def _positive(option: str, value: object, most: int = 200) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise UsageError(f"must be a whole number from 1 to {most}, got {value!r}", source=option,
                         fix=f"e.g. {option} 3")
    return int(text)


NFS_HELP = {
    "server": "NFS server or mount target (name or address)", "export": "exported path, e.g. / or /data",
    "path": "local mount point, e.g. /mnt/data", "vendor": "alibaba-nas, tencent-cfs, aws-efs or generic (default)",
    "nfs_version": "3, 4.0, 4.1 or 4.2 (default: the vendor's recommended one)",
    "options": "mount options that override the vendor preset key by key, e.g. soft,timeo=150",
}
