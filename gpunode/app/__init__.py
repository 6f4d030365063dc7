"""The application layer that commands/ and image/ share: load hosts, parse variables, run a playbook, verify a host.

Each module stays light at import (the heavy packages load inside the functions that use them): every command's
task reaches this layer."""
