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

