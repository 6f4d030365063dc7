"""Read connection settings out of ``ansible_ssh_common_args`` / ``ansible_ssh_extra_args`` strings."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from gpunode.inventory.hostpattern import is_ipv6
from gpunode.inventory.layers import Origin, usage_error

# ssh(1) flags that take an argument (the rest are switches)
_ARG_FLAGS = frozenset("BbcDEeFIiJLlmOopQRSWw")
# switches a ProxyCommand may carry and still be a plain "jump through this bastion"
_HARMLESS_SWITCHES = frozenset("qvACT46aNx")
_OPTION = re.compile(r"\s*([A-Za-z]+)\s*(?:=|\s)\s*(.*)$", re.DOTALL)
_URL_HOST = re.compile(r"\[([^\]]+)\](?::(\d+))?|([^:\[\]]+)(?::(\d+))?")


@dataclass
class SshOptions:
    """What gpunode understands of an ssh argument string; ssh's first-value-wins rule applies."""

    port: str | None = None
    user: str | None = None
    key_file: str | None = None
    jump: str | None = None
    proxy_command: str | None = None
    jump_key_file: str | None = None
    proxy_seen: bool = False
    strict_host_keys: str | None = None   # StrictHostKeyChecking: "no" / "accept-new" mean trust on first use

    def merge(self, later: SshOptions) -> SshOptions:
        """Combine with options that come later on the ssh command line (earlier values win)."""
        out = SshOptions(
            port=self.port or later.port,
            user=self.user or later.user,
            key_file=self.key_file or later.key_file,
            strict_host_keys=self.strict_host_keys or later.strict_host_keys,
        )
        proxy_owner = self if self.proxy_seen else later
        out.jump, out.proxy_command = proxy_owner.jump, proxy_owner.proxy_command
        out.jump_key_file, out.proxy_seen = proxy_owner.jump_key_file, proxy_owner.proxy_seen
        return out


def parse_ssh_args(text: str, origin: Origin) -> SshOptions:
    """Read -o ProxyCommand=, -o ProxyJump= / -J, -o Port= / -p, -i, -o IdentityFile=, -o User= / -l."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise usage_error(
            origin, f"cannot parse ssh arguments {text!r}: {exc}", "close every quote in the ssh arguments"
        ) from exc
    opts = SshOptions()
    for flag, arg in _getopt(tokens):
        if flag == "o" and arg is not None:
            match = _OPTION.match(arg)
            if match:
                _apply_option(opts, match.group(1).lower(), match.group(2).strip())
        elif flag == "J" and arg:
            _apply_option(opts, "proxyjump", arg)
        elif flag == "p" and arg:
            opts.port = opts.port or arg
        elif flag == "i" and arg:
            opts.key_file = opts.key_file or arg
        elif flag == "l" and arg:
            opts.user = opts.user or arg
    return opts


def _apply_option(opts: SshOptions, key: str, value: str) -> None:
    if key == "port":
        opts.port = opts.port or value
    elif key == "user":
        opts.user = opts.user or value
    elif key == "identityfile":
        opts.key_file = opts.key_file or value
    elif key == "stricthostkeychecking":
        opts.strict_host_keys = opts.strict_host_keys or value.lower()
    elif key in ("proxyjump", "proxycommand") and not opts.proxy_seen:
        opts.proxy_seen = True
        if value.lower() == "none":
            return
        if key == "proxyjump":
            opts.jump = value
        else:
            opts.proxy_command = value
            opts.jump, opts.jump_key_file = jump_from_proxy_command(value)


def _getopt(tokens: list[str]) -> Iterator[tuple[str | None, str | None]]:
    """Yield ``(flag, argument)`` pairs like ssh's getopt; positional words come as ``(None, word)``."""
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-":
            yield None, token
            continue
        for position, flag in enumerate(token[1:], start=1):
            if flag not in _ARG_FLAGS:
                yield flag, None
                continue
            arg = token[position + 1 :]
            if not arg and index < len(tokens):
                arg, index = tokens[index], index + 1
            yield flag, arg or None
            break


def jump_from_proxy_command(command: str) -> tuple[str | None, str | None]:
    """``ssh [-q] [-p P] [-i K] -W %h:%p user@bastion`` -> ``("user@bastion:P", "K")``, else Nones."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None, None
    if not tokens or PurePosixPath(tokens[0]).name != "ssh":
        return None, None
    args = _JumpArgs()
    if not all(args.read(flag, arg) for flag, arg in _getopt(tokens[1:])):
        return None, None
    if not args.forward or len(args.destinations) != 1 or "%" in args.destinations[0]:
        return None, None
    return _jump_spec(args.destinations[0], args.user, args.port), args.key


@dataclass
class _JumpArgs:
    """The arguments of a ProxyCommand's ssh that matter for a plain jump; first value wins, as in ssh."""

    port: str | None = None
    user: str | None = None
    key: str | None = None
    forward: bool = False   # -W %h:%p: forward stdin/stdout to the target
    destinations: list[str] = field(default_factory=list)

    def read(self, flag: str | None, arg: str | None) -> bool:
        """Take one (flag, argument) pair; False when it makes the command more than a plain jump."""
        if flag is None:
            self.destinations.append(arg or "")
        elif flag == "W":
            self.forward = arg == "%h:%p"
        elif flag == "p":
            self.port = self.port or arg
        elif flag == "i":
            self.key = self.key or arg
        elif flag == "l":
            self.user = self.user or arg
        elif flag == "o":
            return self._option(arg)
        else:
            return flag in _HARMLESS_SWITCHES
        return True

    def _option(self, arg: str | None) -> bool:
        """An -o option: Port, User and IdentityFile are taken; a nested proxy or a malformed option refuses."""
        match = _OPTION.match(arg or "")
        option = match.group(1).lower() if match else ""
        if not match or option in ("proxycommand", "proxyjump"):
            return False
        value = match.group(2).strip()
        self.port = self.port or (value if option == "port" else None)
        self.user = self.user or (value if option == "user" else None)
        self.key = self.key or (value if option == "identityfile" else None)
        return True


def _jump_spec(destination: str, user: str | None, port: str | None) -> str | None:
    url = destination.startswith("ssh://")
    dest_user, at, host = destination.removeprefix("ssh://").rpartition("@")
    user = dest_user if at else user
    if url:
        match = _URL_HOST.fullmatch(host)
        if not match:
            return None
        host, port = match.group(1) or match.group(3), port or match.group(2) or match.group(4)
    if not host or host.startswith("-"):
        return None
    if is_ipv6(host):
        host = f"[{host}]"
    spec = f"{user}@{host}" if user else host
    return f"{spec}:{port}" if port else spec
