"""The SSH key a build owns: made per build, imported into the cloud, removed from the image by image_cleanup."""

from __future__ import annotations

import os
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def generate_key(path: Path, comment: str) -> str:
    """Write a new ed25519 private key (OpenSSH format, mode 0600) and `path`.pub; returns the public key line."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    line = f"{public.decode()} {comment}"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private)
    Path(f"{path}.pub").write_text(line + "\n")
    return line


def public_key_line(private_key_file: str | Path) -> str:
    """The OpenSSH public key line of a private key file (ed25519, RSA or ECDSA, unencrypted)."""
    key = paramiko.PKey.from_path(str(private_key_file))
    return f"{key.get_name()} {key.get_base64()}"



def key_user_data(user: str, public_line: str) -> str:
    """User data (a shell script cloud-init runs once, as root) that lets the build key in for `user`.

    Alibaba Cloud and Tencent Cloud attach only key pairs that exist in the account; Packer's temporary one on
    Tencent is detached with a forced stop and restart after provisioning (packer-plugin-tencentcloud
    step_detach_temp_key_pair.go), which would undo image_cleanup. The build key comes in this way instead and
    image_cleanup removes it (build-key) like on every other builder.
    """
    from gpunode.connection import q

    return ("#!/bin/sh\n# gpunode: the image build's key (image_cleanup removes it before capture)\n"
            f"user={q(user)}\n"
            'home=$(getent passwd "$user" | cut -d: -f6)\n'
            '[ -n "$home" ] || exit 1\n'
            'mkdir -p "$home/.ssh" && chmod 700 "$home/.ssh"\n'
            f'echo {q(public_line)} >> "$home/.ssh/authorized_keys"\n'
            'chmod 600 "$home/.ssh/authorized_keys" && chown -R "$user:" "$home/.ssh"\n')
