# Install headers for the running kernel, or (policy upgrade) the newest distro kernel with its headers.
# Arguments: POLICY(require|upgrade) FAMILY(apt|rpm) HEADERS_PACKAGES UPGRADE_PACKAGES...
# (HEADERS_PACKAGES: one apt package, or space-separated RPMs such as AL2023's kernel6.12-devel-V kernel6.12-modules-extra-V)
# Prints "@@target KERNEL" (the kernel modules must be built for) and "@@reboot" when that is a new kernel.
# Exit 10: no headers exist for the running kernel and the policy does not allow an upgrade.
set -u
policy=$1 family=$2 headers=$3
shift 3
running=$(uname -r)
export DEBIAN_FRONTEND=noninteractive
apt_opts="-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
available() {
  if [ "$family" = apt ]; then
    cand=$(apt-cache policy "$headers" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    [ -n "$cand" ] && [ "$cand" != "(none)" ]
  else
    # shellcheck disable=SC2086
    dnf -q list --available $headers >/dev/null 2>&1 || dnf -q list --installed $headers >/dev/null 2>&1
  fi
}
# GPUNODE_APT_LISTS_FRESH=1: this run refreshed the lists already (gpunode/steps/pkgmgr.py LISTS_FRESH_ENV); the
# update line is the one gpunode's other installs run (AptManager.update), so the run knows the lists are fresh.
if [ "$family" = apt ] && [ "${GPUNODE_APT_LISTS_FRESH:-}" != 1 ]; then
  apt-get -y -q -o DPkg::Lock::Timeout=600 -o Acquire::Languages=none update >/dev/null ||
    { echo "apt-get update failed" >&2; exit 1; }
fi
if available; then
  if [ "$family" = apt ]; then
    # shellcheck disable=SC2086
    apt-get $apt_opts --no-install-recommends install "$headers" || exit 1
  else
    # shellcheck disable=SC2086
    dnf -y install $headers || exit 1
  fi
  echo "@@target $running"
  exit 0
fi
if [ "$policy" != upgrade ]; then
  echo "no package $headers exists for the running kernel $running" >&2
  if [ "$family" = apt ]; then
    echo "headers that exist:" >&2
    apt-cache pkgnames linux-headers- 2>/dev/null | grep -E '^linux-headers-[0-9]' | grep -v -- '-common' | sort -V | tail -n 12 >&2
  else
    echo "kernel-devel versions that exist:" >&2
    dnf -q list --showduplicates kernel-devel 2>/dev/null | tail -n 12 >&2
  fi
  exit 10
fi
if [ "$family" = apt ]; then
  # shellcheck disable=SC2086
  apt-get $apt_opts --no-install-recommends install "$@" || exit 1
else
  dnf -y install "$@" || exit 1
fi
newest=$(ls /boot/vmlinuz-* 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V | tail -n 1)
echo "@@target ${newest:-$running}"
[ -n "$newest" ] && [ "$newest" != "$running" ] && echo "@@reboot"
exit 0
