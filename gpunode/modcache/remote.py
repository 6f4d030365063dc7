"""Host-side scripts of the module cache: build with DKMS, pack the build as a binary .deb, install a package.

dkms 3.x (Debian 12's 3.0.10) no longer has `mkbmdeb`/`mkdeb`/`mkrpm`/`mkkmp` (removed upstream in
dkms-project/dkms pull request #161; Debian bug #1009179; `dkms --help` offers only `mktarball | ldtarball`), so
gpunode packs the built tree itself with `dpkg-deb --build` (in dpkg, on every Debian host): what `mkbmdeb` shipped,
the DKMS tree of one kernel (`/var/lib/dkms/<m>/<v>/<kernel>/<arch>/module/*.ko` and its build log), no source.
Installing it and running `dkms install -k <kernel>` copies the built module into `/lib/modules/<kernel>/updates/dkms`
and runs depmod without compiling (dkms installs a module that is already built), and `dkms status` lists it as
installed, as after a local build.

On RPM hosts (form "tar", the distro adapter's `module_cache_form`) the same tree travels as a gzip tarball: tar and
gzip are on every EL and Amazon Linux host, while rpmbuild (rpm-build) is not. There the driver's kmod package runs
`dkms build`/`dkms install` in its own %post, so the tree is put in place *before* that package is installed
(`install_command` with no DKMS source added yet only places it): dkms then finds the module built and skips the
compiler (gpunode/distros/rpm.py, EL table `kmod_post` and `dkms_skips_built`, cites the lines)."""

from __future__ import annotations

import re

from gpunode.connection import q
from gpunode.modcache.dkms_shell import free_space, installed_check, uninstall_if_diverged
from gpunode.modcache.key import CacheKey

BEGIN = "--- gpunode module package (base64) ---"


def _vars(key: CacheKey) -> str:
    return f"m={q(key.module)}; v={q(key.version)}; k={q(key.kernel)}"


# `dkms install` of the built module ($m $v $k set), its files in the kernel tree checked by dkms itself; an install
# whose files differ (a full disk) is undone first, since dkms will not install over it
_K = '"$k"'
_INSTALL = "\n".join((uninstall_if_diverged('"$m"', '"$v"', _K),
                      f'dkms install -m "$m" -v "$v" -k "$k" || {{ rc=$?; {free_space(_K)}; exit $rc; }}',
                      installed_check('-m "$m" -v "$v" -k "$k"', _K)))


def package_name(key: CacheKey) -> str:
    """A Debian package name for the entry: gpunode-dkms-<module>-<kernel> (lower case, [a-z0-9.+-])."""
    return re.sub(r"[^a-z0-9.+-]", "-", f"gpunode-dkms-{key.module}-{key.kernel}".lower())


def package_version(key: CacheKey) -> str:
    """The module version as a Debian version (one must start with a digit)."""
    version = re.sub(r"[^A-Za-z0-9.+~-]", "+", key.version)
    return version if version[:1].isdigit() else f"0~{version}"


def build_command(key: CacheKey) -> str:
    """Add the module to DKMS when its source is not added yet, build and install it for the kernel (compiles)."""
    return (f"{_vars(key)}; "
            'if ! dkms status -m "$m" -v "$v" 2>/dev/null | grep -q .; then dkms add -m "$m" -v "$v"; fi && {\n'
            f'{_INSTALL}\n}}')


FORMS = ("deb", "tar")


_TREE_CHECK = """tree=/var/lib/dkms/$m/$v/$k/$a
ls "$tree"/module/*.ko* >/dev/null 2>&1 || { echo "no built module under $tree" >&2; exit 3; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"""  # the built tree of one kernel ($tree) must hold a module; $work is a scratch folder


def pack_command(key: CacheKey, form: str = "deb") -> str:
    """Pack the built tree as a .deb (form "deb") or a tar.gz of the tree (form "tar", paths relative to /); print
    VERMAGIC=, FILE=, then the package in base64 after BEGIN."""
    if form == "tar":
        return _pack_tar(key)
    name, version = package_name(key), package_version(key)
    return f"""set -e; {_vars(key)}; a=$(uname -m)
{_TREE_CHECK}mkdir -p "$work/p/DEBIAN" "$work/p$tree"
cp -a "$tree/module" "$work/p$tree/"
[ ! -d "$tree/log" ] || cp -a "$tree/log" "$work/p$tree/"
cat > "$work/p/DEBIAN/control" <<CONTROL
Package: {name}
Version: {version}
Architecture: $(dpkg --print-architecture)
Maintainer: gpunode <root@localhost>
Section: kernel
Priority: optional
Description: $m $v built by DKMS for Linux $k (gpunode module cache)
 Binary-only DKMS tree; install it, then dkms install -m $m -v $v -k $k.
CONTROL
dpkg-deb --root-owner-group -Zxz --build "$work/p" "$work/x.deb" >/dev/null
echo "VERMAGIC=$(modinfo -F vermagic "$(ls "$tree"/module/*.ko* | head -1)")"
echo "FILE={name}_{version}_$(dpkg --print-architecture).deb"
echo {q(BEGIN)}
base64 -w0 "$work/x.deb"; echo"""


def _pack_tar(key: CacheKey) -> str:
    name, version = package_name(key), package_version(key)
    return f"""set -e; {_vars(key)}; a=$(uname -m)
{_TREE_CHECK}logs=; [ ! -d "$tree/log" ] || logs="${{tree#/}}/log"
tar -C / -czf "$work/x.tar.gz" "${{tree#/}}/module" $logs
echo "VERMAGIC=$(modinfo -F vermagic "$(ls "$tree"/module/*.ko* | head -1)")"
echo "FILE={name}_{version}_$a.tar.gz"
echo {q(BEGIN)}
base64 -w0 "$work/x.tar.gz"; echo"""


def parse_pack(stdout: str) -> tuple[str, str, bytes]:
    """(vermagic, file name, package bytes) from what `pack_command` printed."""
    import base64

    head, sep, body = stdout.partition(BEGIN)
    if not sep:
        raise ValueError("the host printed no package")
    fields = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    return fields.get("VERMAGIC", ""), fields.get("FILE", "module.deb"), base64.b64decode(body.strip())


def _received(variables: str, sha256: str, suffix: str, unpack: str) -> str:
    """The start of an install: the package on stdin saved as $f and checked by its sha256 (exit 5), unpacked into $x
    by `unpack`, and the module in it checked against the kernel by its vermagic (exit 4). `variables` sets $m $v $k
    (shell), `sha256` is shell too (quoted, or a variable)."""
    return f"""set -e; {variables}; a=$(uname -m)
f=$(mktemp --suffix={suffix}); x=$(mktemp -d); trap 'rm -rf "$f" "$x"' EXIT
cat > "$f" || {{ echo "the package could not be stored in '$f' ($(df -Ph "${{f%/*}}" | \
awk 'NR == 2 {{print $4 " free of " $2 " on " $6}}'))" >&2; exit 1; }}
echo {sha256}"  $f" | sha256sum -c --quiet - || {{ echo "the package arrived damaged (sha256)" >&2; exit 5; }}
{unpack}
ko=$(ls "$x"/var/lib/dkms/$m/$v/$k/$a/module/*.ko* 2>/dev/null | head -1)
[ -n "$ko" ] || {{ echo "the package holds no $m module for kernel $k" >&2; exit 4; }}
vm=$(modinfo -F vermagic "$ko")
case "$vm" in "$k "*) ;; *) echo "vermagic '$vm' is not kernel $k's" >&2; exit 4;; esac"""


def install_command(key: CacheKey, sha256: str, form: str = "deb") -> str:
    """Install the package arriving on stdin (form "tar": `_install_tar`): checksum after the transfer, the DKMS
    source added (no build), dpkg, the module's vermagic against the kernel (exit 4 when it differs), `dkms
    install` of the built module."""
    if form == "tar":
        return _install_tar(key, sha256)
    return f"""{_received(_vars(key), q(sha256), ".deb", 'dpkg-deb -x "$f" "$x"')}
if ! dkms status -m "$m" -v "$v" 2>/dev/null | grep -q .; then dkms add -m "$m" -v "$v" >/dev/null; fi
DEBIAN_FRONTEND=noninteractive dpkg -i "$f"
{_INSTALL}
"""


def _install_tar(key: CacheKey, sha256: str) -> str:
    """The tarball arriving on stdin: checksum, vermagic against the kernel (exit 4), the tree copied into
    /var/lib/dkms. With the module's DKMS source in /usr/src (its package installed) it is added when not yet and
    `dkms install`ed (no compile: it is built); without it the tree is only placed, and prints PLACED: the driver
    package installed next adds it, and its %post's `dkms build`/`dkms install` find it built."""
    return f"""{_received(_vars(key), q(sha256), ".tar.gz", _UNTAR)}
{_PLACE_TREE}
if [ ! -f /usr/src/$m-$v/dkms.conf ]; then echo PLACED; exit 0; fi
[ -L /var/lib/dkms/$m/$v/source ] || dkms add -m "$m" -v "$v" >/dev/null
{_INSTALL}
"""


_UNTAR = 'tar -C "$x" -xzf "$f" --no-same-owner'
_PLACE_TREE = """mkdir -p /var/lib/dkms/$m/$v/$k/$a
rm -rf /var/lib/dkms/$m/$v/$k/$a/module
cp -a "$x"/var/lib/dkms/$m/$v/$k/$a/. /var/lib/dkms/$m/$v/$k/$a/"""  # the unpacked tree ($x) into DKMS's tree


def hook_install_command(form: str = "deb") -> str:
    """The install a kernel hook runs, inside the package manager's own transaction: $m $v $k and $sha set by the
    caller, the package on stdin. dpkg's lock is held by the dpkg that runs the hook, so the .deb is unpacked
    (`dpkg-deb -x`) rather than installed with `dpkg -i`: its DKMS tree is put in place as the tar form's is, and
    `dkms install` installs the built module (no compile). Exit 4/5 as `install_command`; 3: the module's DKMS
    source is not added on this host."""
    unpack = _UNTAR if form == "tar" else 'dpkg-deb -x "$f" "$x"'
    return f"""{_received(":", '"$sha"', ".pkg", unpack)}
[ -L /var/lib/dkms/$m/$v/source ] || {{ echo "$m $v is not added to DKMS on this host" >&2; exit 3; }}
{_PLACE_TREE}
{_INSTALL}
"""


def finish_command(key: CacheKey) -> str:
    """After the driver package's own %post: the module installed for the kernel from the tree in place (dkms
    skips the compile for a built module; it builds when the tree is missing), and `dkms status` says installed."""
    return f"{_vars(key)}; {{\n{_INSTALL}\n}}"
