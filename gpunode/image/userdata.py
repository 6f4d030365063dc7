"""`gpunode user-data`: first-boot provisioning for nodes nobody SSHes into (autoscaled node pools, Batch, EC2 ASGs).

The output is user data (a bash script, #cloud-config that writes and runs it, or the script as the
`text/x-shellscript` part of a MIME multi-part archive, the form AWS Batch launch templates take) that, on the new
node, as root: unpacks a self-contained gpunode bundle (gpunode and its dependencies as installed here, plus the
playbook), runs `gpunode provision --hosts localhost` with that playbook (the local connection, no SSH), runs
verify-gpu when the node has an NVIDIA GPU, logs to stdout (cloud-init copies it to the console and
cloud-init-output.log) and to /var/log/gpunode-first-boot.log, and leaves
/var/lib/gpunode/first-boot/{status,result.json,report.json}.

The bundle is embedded (no package index or network needed at boot) or fetched from `bundle_url` and checked against
its sha256. It holds compiled extensions (cryptography, PyYAML...) built for this machine's Python and architecture:
the script runs it with the first interpreter of that minor version it finds (`python3.11` ... before `python3`, see
gpunode/image/interpreter.py), installs the distro's package for it when there is none, and otherwise stops with
exit code 3 and a marker that names the version it needs.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import io
import os
import platform
import re
import shlex
import tarfile
from pathlib import Path

from gpunode.errors import UsageError
from gpunode.image import interpreter
from gpunode.image.mime import mime_archive
from gpunode.playbook import load_playbook

FORMATS = ("shell", "cloud-init", "mime")
STATE = "/var/lib/gpunode/first-boot"
LOG = "/var/log/gpunode-first-boot.log"
# EC2 and Tencent CVM accept at most 16 KB of user data, Alibaba ECS 32 KB: an embedded bundle fits none of them
# (it is megabytes), only NoCloud seeds, self-managed hosts and images; those clouds need bundle_url.
CLOUD_LIMIT = 16 * 1024


def _distributions() -> list[metadata.Distribution]:
    """gpunode's runtime dependency closure as installed here (extras and other platforms' markers left out)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip vendors it
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]

    seen: dict[str, metadata.Distribution] = {}
    todo = [req for req in (metadata.requires("gpunode") or [])]
    while todo:
        req = Requirement(todo.pop())
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[key] = dist
        todo.extend(dist.requires or [])
    return list(seen.values())


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def build_bundle(playbook: Path) -> bytes:
    """tar.xz: lib/ (gpunode and its dependencies' files, no bytecode) and playbook.yml."""
    package = Path(__file__).resolve().parents[1]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=3) as tar:
        for folder, dirs, files in sorted(os.walk(package, followlinks=True)):  # _scripts links to scripts/
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in sorted(files):
                path = Path(folder) / name
                _add_file(tar, f"lib/gpunode/{path.relative_to(package)}", path.read_bytes())
        for dist in _distributions():
            for file in dist.files or []:
                text = str(file)
                if text.startswith("..") or text.endswith(".pyc") or "__pycache__" in text:
                    continue
                located = Path(str(file.locate()))
                if located.is_file():
                    _add_file(tar, f"lib/{text}", located.read_bytes(), 0o755 if text.endswith(".so") else 0o644)
        _add_file(tar, "playbook.yml", playbook.read_bytes())
    return buffer.getvalue()


def bundle_names(bundle: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        return tar.getnames()


def render_script(bundle: bytes, playbook_name: str, playbook_sha256: str, variables: list[str],
                  bundle_url: str | None = None) -> str:
    """The first-boot script (bash). Every value from the user reaches the shell quoted."""
    digest = hashlib.sha256(bundle).hexdigest()
    exact = interpreter.bundle_python(bundle_names(bundle))
    python = interpreter.wanted(exact)
    machine = platform.machine()  # the compiled extensions in the bundle are for this architecture
    var_args = " ".join(f"--var {shlex.quote(v)}" for v in variables)
    if bundle_url:
        # python3's urllib: present wherever the bundle can run (curl and wget are not on every base image)
        fetch = ("\"$py\" -c 'import shutil, sys, time, urllib.request\n"
                 "for attempt in range(5):\n"
                 "    try:\n"
                 "        with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], \"wb\") as f:\n"
                 "            shutil.copyfileobj(r, f)\n"
                 "        break\n"
                 "    except OSError as exc:\n"
                 "        print(\"download failed:\", exc); time.sleep(2 ** attempt)\n"
                 "else:\n"
                 "    sys.exit(1)' "
                 f'{shlex.quote(bundle_url)} "$tmp/bundle.tar.xz" || fail "cannot download the bundle"')
    else:
        encoded = base64.encodebytes(bundle).decode()
        fetch = f"base64 -d > \"$tmp/bundle.tar.xz\" <<'GPUNODE_BUNDLE'\n{encoded}GPUNODE_BUNDLE"
    return f"""#!/bin/bash
# gpunode first-boot provisioning, written by `gpunode user-data`: playbook {playbook_name}
# (sha256 {playbook_sha256}), bundle sha256 {digest}. Runs as root (cloud-init user data); safe to run again.
set -u
state={STATE}
log={LOG}
mkdir -p "$state" && chmod 700 /var/lib/gpunode
exec > >(tee -a "$log") 2>&1
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
playbook={shlex.quote(playbook_name)}
bundle_sha={digest}
bundle=/var/lib/gpunode/bundle-$bundle_sha

marker() {{  # status, exit codes, what ran: for health checks and people
    printf '%s\\n' "$1" > "$state/status.tmp" && mv -f "$state/status.tmp" "$state/status"
    "${{py:-python3}}" - "$1" "$2" "${{3:-}}" "$started" "$playbook" "$bundle_sha" "$state" "$log" <<'GPUNODE_MARKER' ||
import json, sys, time
status, provision, verify, started, playbook, bundle, state, log = sys.argv[1:]
result = {{"status": status, "provision_exit": int(provision) if provision.lstrip("-").isdigit() else None,
          "verify_exit": int(verify) if verify.lstrip("-").isdigit() else None, "playbook": playbook,
          "bundle_sha256": bundle, "started": started,
          "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "report": state + "/report.json",
          "verify_report": state + "/verify.json" if verify else None, "log": log}}
with open(state + "/result.json.tmp", "w") as out:
    json.dump(result, out, indent=2)
GPUNODE_MARKER
        printf '{{"status": "%s"}}\\n' "$1" > "$state/result.json.tmp"
    mv -f "$state/result.json.tmp" "$state/result.json"
}}
fail() {{ echo "gpunode first boot: FAILED: $1"; marker failed "${{2:-}}"; exit "${{3:-1}}"; }}
{interpreter.finder_script(exact)}

echo "gpunode first boot: playbook $playbook ($started)"
arch=$(uname -m)
[ "$arch" = {shlex.quote(machine)} ] ||
    fail "the bundle is for {machine}, this node is $arch: make the user data with gpunode on an $arch machine"
find_python || {{ install_python && find_python; }} ||
    fail "no Python {python} on this node and none could be installed from the distribution (tried: \
{' '.join(interpreter.candidates(exact))}): install Python {python}, or make the user data with gpunode running on \
the node's Python" "" {interpreter.NO_PYTHON_EXIT}
echo "gpunode first boot: Python $("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') ($py)"
if [ ! -f "$bundle/.complete" ]; then
    tmp=$(mktemp -d /var/lib/gpunode/bundle.XXXXXX)
    {fetch}
    echo "$bundle_sha  $tmp/bundle.tar.xz" | sha256sum -c --quiet || fail "the bundle's sha256 is not $bundle_sha"
    "$py" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as tar:
    tar.extractall(sys.argv[2], **({{"filter": "data"}} if hasattr(tarfile, "data_filter") else {{}}))' \\
        "$tmp/bundle.tar.xz" "$tmp" || fail "cannot unpack the bundle"
    rm -f "$tmp/bundle.tar.xz" && touch "$tmp/.complete" && rm -rf "$bundle" && mv "$tmp" "$bundle"
fi
cd "$bundle" || fail "no bundle at $bundle"
export PYTHONPATH="$bundle/lib" PYTHONDONTWRITEBYTECODE=1 GPUNODE_KNOWN_HOSTS="$state/known_hosts"
"$py" -m gpunode provision --hosts localhost --playbook "$bundle/playbook.yml" {var_args} \\
    --json-report "$state/report.json" --log-dir "$state/logs"
rc=$?
vrc=""
if grep -qs 0x10de /sys/bus/pci/devices/*/vendor; then  # an NVIDIA device: the GPU stack must be healthy
    "$py" -m gpunode verify-gpu localhost --json > "$state/verify.json"
    vrc=$?
fi
if [ "$rc" = 0 ] && [ "${{vrc:-0}}" = 0 ]; then
    marker ok "$rc" "$vrc"
    echo "gpunode first boot: ok (result in $state/result.json)"
    exit 0
fi
marker failed "$rc" "$vrc"
echo "gpunode first boot: FAILED (provision exit $rc, verify-gpu exit ${{vrc:-not run}}); see $state/report.json"
exit 1
"""


def cloud_config(script: str) -> str:
    """#cloud-config that writes the script (0700) and runs it once, from runcmd."""
    encoded = base64.b64encode(script.encode()).decode()
    return ("#cloud-config\n# gpunode first-boot provisioning (`gpunode user-data --format cloud-init`)\n"
            "write_files:\n  - path: /var/lib/gpunode/first-boot.sh\n    permissions: '0700'\n    encoding: b64\n"
            f"    content: {encoded}\nruncmd:\n  - [bash, /var/lib/gpunode/first-boot.sh]\n")


def user_data(playbook: str, variables: list[str], fmt: str = "shell", bundle_url: str | None = None,
              bundle_out: str | None = None) -> tuple[str, bytes]:
    """(user data text, bundle). With bundle_url the bundle is not embedded: write it to bundle_out and upload it."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be shell, cloud-init or mime, not {fmt!r}",
                         fix="e.g. --format mime (AWS Batch launch templates), --format cloud-init")
    if bundle_url and not re.match(r"^https?://\S+\Z", bundle_url):
        raise UsageError(f"--bundle-url must be an http(s) URL, not {bundle_url!r}",
                         fix="upload the bundle (--bundle-out FILE) and give its URL")
    if bundle_url and not bundle_out:
        raise UsageError("--bundle-url needs --bundle-out FILE (the bundle to upload there)",
                         fix="add --bundle-out gpunode-bundle.tar.xz")
    from gpunode.app.variables import parse_vars
    from gpunode.inventory import Host
    from gpunode.playbook.validate import check_arguments
    from gpunode.playbook.vartypes import check_var_types

    extra = parse_vars(variables)  # refused now (exit 2), not at boot
    book = load_playbook(playbook)
    check_var_types(book, extra)
    check_arguments(book, [Host(name="localhost", address="127.0.0.1")], extra)  # as provision: not at first boot
    bundle = build_bundle(Path(book.path))
    script = render_script(bundle, book.name, book.sha256, variables, bundle_url)
    if bundle_out:
        Path(bundle_out).write_bytes(bundle)
    if fmt == "mime":  # AWS Batch merges its own part into the launch template's user data (gpunode/image/mime.py)
        return mime_archive([("shell", script)]), bundle
    return (cloud_config(script) if fmt == "cloud-init" else script), bundle
