#!/usr/bin/env bash
# gpunode facts probe: runs on the TARGET host in one ssh exec (`bash -s` < facts.sh),
# as root or as a plain user. Read-only, no network, no apt/dnf calls; every probe
# tolerates missing commands and files and the script always exits 0.
#
# Output format (version 1), line oriented, parsed by gpunode/facts/parse.py:
#   @@gpunode-facts 1        first line: marker + format version
#   @@kv NAME                a block of `key=value` lines (value = rest of line, never
#                            contains a newline; keys may repeat = a list, in order)
#   @@raw NAME               a block of raw text; every line is prefixed with `|`
#                            (so file content can never look like a header)
#   @@end                    last line; its absence means the output was cut short
# NAME is everything after the first space ("pci 0000:10:1c.0", "file /etc/fstab").
# Fields inside a value that carry several items are separated by TABs.
# Any other line (stray stderr, motd noise) is to be ignored by the parser.
#
# Root vs. user: everything works as a plain user except DMI product_uuid (root-only file)
# and the open-fd scan of *other users'* processes; lock holders are still found through
# /proc/locks, which is world readable. /proc/self/mounts is filtered to network and FUSE
# filesystems plus /, /var, /tmp, /home, /boot, /boot/efi. Package lists come from ONE
# dpkg-query or rpm call; nvidia-smi, apt, dnf and docker are never run.

set -u
export LC_ALL=C
# bash reads this script from stdin (`bash -s`): external commands that might read stdin get
# </dev/null so none of them can swallow the rest of the script.
PATH="${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
shopt -s nullglob

start_ns=$(date +%s%N 2>/dev/null </dev/null)

have() { command -v "$1" >/dev/null 2>&1; }
have_timeout=0
have timeout && have_timeout=1
# run a possibly slow command with a time limit when coreutils timeout exists
to() { if ((have_timeout)); then timeout 10 "$@" </dev/null; else "$@" </dev/null; fi; }

sec() { printf '@@%s %s\n' "$1" "$2"; }
kv() {
    local v=${2-}
    v=${v//$'\n'/ }
    v=${v//$'\r'/}
    printf '%s=%s\n' "$1" "$v"
}
# rd VAR FILE: first line of FILE into VAR (empty when missing/unreadable), no fork
rd() {
    local __l=""
    if [[ -r $2 ]]; then IFS= read -r __l 2>/dev/null <"$2" || true; fi
    printf -v "$1" '%s' "$__l"
}
prefix_lines() {
    local l n=0
    while IFS= read -r l || [[ -n $l ]]; do
        printf '|%s\n' "$l"
        n=$((n + 1))
        ((n >= 5000)) && break
    done
}
raw_file() {
    [[ -f $1 && -r $1 ]] || return 0
    sec raw "file $1"
    prefix_lines <"$1" 2>/dev/null
}
# cmdline_of PID: sets $cmd to the NUL-separated /proc/PID/cmdline joined by spaces
cmd=""
cmdline_of() {
    local a out=""
    if [[ -r /proc/$1/cmdline ]]; then
        while IFS= read -r -d '' a || [[ -n $a ]]; do out+="${out:+ }$a"; done 2>/dev/null <"/proc/$1/cmdline"
    fi
    out=${out//$'\t'/ }
    cmd=${out//$'\n'/ }
}

printf '@@gpunode-facts 1\n'

# ---------------------------------------------------------------- host / identity / boot
sec kv host
kv arch "$(uname -m 2>/dev/null)"
rd v /proc/sys/kernel/hostname
kv hostname "$v"
rd v /proc/sys/kernel/osrelease
kv kernel "$v"
kv uid "${EUID:-}"
kv user "$(id -un 2>/dev/null </dev/null || printf '%s' "${USER:-}")"
kv sudo_user "${SUDO_USER:-}"
rd v /proc/sys/kernel/random/boot_id
kv boot_id "$v"
rd v /proc/1/stat
pid1_start=""
if [[ -n $v ]]; then
    rest=${v##*) }
    read -r -a stat_fields <<<"$rest"
    pid1_start=${stat_fields[19]:-}
fi
kv pid1_starttime "$pid1_start"
rd v /proc/uptime
kv uptime "${v%% *}"
rd v /proc/cmdline
kv cmdline "$v"
virt_c="" virt_v=""
if have systemd-detect-virt; then
    virt_c=$(systemd-detect-virt -c 2>/dev/null </dev/null)
    virt_v=$(systemd-detect-virt -v 2>/dev/null </dev/null)
fi
kv virt_container "$virt_c"
kv virt_vm "$virt_v"
rd v /run/systemd/container
kv run_systemd_container "$v"
v=0
[[ -e /.dockerenv ]] && v=1
kv dockerenv "$v"
efi=0
[[ -d /sys/firmware/efi ]] && efi=1
kv efi "$efi"
sb=""
if ((efi)) && have od; then
    f=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9
    if [[ -r $f ]]; then
        sb=$(od -An -tu1 -j4 -N1 "$f" 2>/dev/null </dev/null)
    elif [[ -r /sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9/data ]]; then
        sb=$(od -An -tu1 -N1 /sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9/data \
            2>/dev/null </dev/null)
    fi
    sb=${sb//[[:space:]]/}
fi
kv secure_boot "$sb"

# ---------------------------------------------------------------- os release files
if [[ -r /etc/os-release ]]; then
    raw_file /etc/os-release
else
    raw_file /usr/lib/os-release
fi
raw_file /etc/system-release

# ---------------------------------------------------------------- DMI (cloud vendor)
sec kv dmi
for f in sys_vendor product_name product_version board_vendor board_name chassis_asset_tag \
    chassis_vendor bios_vendor bios_version product_uuid; do
    rd v "/sys/class/dmi/id/$f"
    [[ -n $v ]] && kv "$f" "$v"
done
rd v /sys/hypervisor/uuid
[[ -n $v ]] && kv hypervisor_uuid "$v"

# ---------------------------------------------------------------- kernels and headers
sec kv kernel
for f in /boot/vmlinuz-*; do kv image "${f#/boot/vmlinuz-}"; done
for f in /lib/modules/*; do
    [[ -d $f ]] || continue
    kv modules_dir "${f##*/}"
    [[ -e $f/build ]] && kv build_ok "${f##*/}"
done
for f in /usr/src/kernels/*; do [[ -d $f ]] && kv src_kernel "${f##*/}"; done
for f in /usr/src/linux-headers-*; do [[ -d $f ]] && kv headers_dir "${f##*/}"; done
rd running /proc/sys/kernel/osrelease
v=0
[[ -n $running && -e /lib/modules/$running/build ]] && v=1
kv running_build "$v"
# The package that owns the running kernel's modules names its -devel package (AL2023: kernel6.12 -> kernel6.12-devel).
if [[ -n $running && -d /lib/modules/$running ]] && have rpm && ! have dpkg-query; then
    to rpm -qf --qf '%{NAME}\n' "/lib/modules/$running" 2>/dev/null | while read -r v; do
        [[ $v == kernel* ]] && kv running_package "$v"
    done
fi

# ---------------------------------------------------------------- package manager, locks
sec kv pkgmgr
for f in apt-get dnf yum zypper dpkg-query rpm; do have "$f" && kv has "$f"; done
v=0
[[ -e /var/run/reboot-required ]] && v=1
kv reboot_required "$v"
# an interrupted package transaction: dpkg's journal (updates/) not empty, packages left half-way
# (Status not installed/config-files/not-installed, or reinstreq); yum's unfinished transaction files
v=0
for f in /var/lib/dpkg/updates/*; do v=1 && break; done
kv dpkg_journal "$v"
v=""
[[ -r /var/lib/dpkg/status ]] && v=$(awk '/^Package: /{p=$2} /^Status: /{if ($3 == "reinstreq" ||
    ($4 != "installed" && $4 != "config-files" && $4 != "not-installed")) printf "%s:%s ", p, $4}' \
    /var/lib/dpkg/status </dev/null 2>/dev/null)
kv dpkg_unfinished "$v"
v=0
for f in /var/lib/yum/transaction-all.*; do v=1 && break; done
kv yum_unfinished "$v"
v=""
have cloud-init && v=$(command -v cloud-init)
kv cloud_init_bin "$v"
for f in /run/cloud-init/result.json /run/cloud-init/status.json /etc/cloud/cloud-init.disabled; do
    v=0
    [[ -e $f ]] && v=1
    kv "exists" "$f"$'\t'"$v"
done

locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock
    /var/lib/rpm/.rpm.lock /var/run/yum.pid /var/cache/dnf/*lock* /var/lib/dnf/rpmdb_lock.pid)
present=()
for f in "${locks[@]}"; do
    if [[ -e $f ]]; then
        present+=("$f")
        kv lock_file "$f"
    fi
done
declare -A holder_pids=()
add_holder() { # path pid source
    [[ $2 =~ ^[0-9]+$ && -d /proc/$2 ]] || return 0
    kv holder "$1"$'\t'"$2"$'\t'"$3"
    holder_pids[$2]=1
}
fcntl_locks=()
for f in ${present[@]+"${present[@]}"}; do
    if [[ $f == *.pid ]]; then # yum/dnf pid-file locks: the content is the holder
        rd v "$f"
        add_holder "$f" "${v//[[:space:]]/}" pidfile
    else
        fcntl_locks+=("$f")
    fi
done
if ((${#fcntl_locks[@]})); then
    # /proc/locks is world readable: lock owner pids by device:inode, so it works without
    # root. Keys are "MAJ:MIN:INODE" (hex, hex, decimal) exactly as /proc/locks prints them.
    declare -A key_path=()
    if have stat; then
        while read -r ino dev path; do
            [[ $ino =~ ^[0-9]+$ && $dev =~ ^[0-9]+$ ]] || continue
            printf -v key '%02x:%02x:%s' $(((dev >> 8) & 0xfff)) $(((dev & 0xff) | ((dev >> 12) & 0xfff00))) "$ino"
            key_path[$key]=$path
        done < <(stat -c '%i %d %n' "${fcntl_locks[@]}" 2>/dev/null </dev/null)
    fi
    if ((${#key_path[@]})) && [[ -r /proc/locks ]]; then
        while read -r _ kind _ _ pid key _; do
            [[ $kind == POSIX || $kind == FLOCK || $kind == OFDLCK ]] || continue
            [[ -n ${key_path[$key]+x} ]] && add_holder "${key_path[$key]}" "$pid" locks
        done </proc/locks
    fi
    # processes with the lock file open (root sees all, users their own). The fd link text is
    # relative to the process's root, so a candidate counts only if it is the very same file
    # (-ef: same device and inode): apt inside a container must not show up as our holder.
    if have find; then
        args=()
        for f in "${fcntl_locks[@]}"; do args+=(-o -lname "$f"); done
        pids=(/proc/[0-9]*/fd)
        if ((${#pids[@]})); then
            while IFS=$'\t' read -r fdpath target; do
                pid=${fdpath#/proc/}
                [[ $fdpath -ef $target ]] && add_holder "$target" "${pid%%/*}" fd
            done < <(find "${pids[@]}" -maxdepth 1 \( -false "${args[@]}" \) -printf '%p\t%l\n' 2>/dev/null </dev/null)
        fi
    elif have fuser; then # fuser compares device and inode itself
        for f in "${fcntl_locks[@]}"; do
            for pid in $(fuser "$f" 2>/dev/null); do add_holder "$f" "${pid//[!0-9]/}" fuser; done
        done
    fi
fi

# processes that matter for package managers / first boot; plus every lock holder
sec kv procs
for c in /proc/[0-9]*/comm; do
    comm=""
    IFS= read -r comm 2>/dev/null <"$c" || continue
    pid=${c#/proc/}
    pid=${pid%/comm}
    case $comm in
    unattended-upgr* | apt | apt-get | aptitude | apt.systemd.dai | dpkg | dnf | dnf-automatic | yum | \
        yum-cron | rpm | packagekitd | cloud-init | cloud-init-* | needrestart | aptd | apt-check) ;;
    *) [[ -n ${holder_pids[$pid]+x} ]] || continue ;;
    esac
    cmdline_of "$pid"
    kv proc "$pid"$'\t'"${comm//$'\t'/ }"$'\t'"${cmd:0:2000}"
done

# ---------------------------------------------------------------- installed packages (one query)
pkgs="" pkgtool=""
if have dpkg-query; then
    pkgtool=dpkg
    # shellcheck disable=SC2016 # ${...} are dpkg-query format fields, not shell
    pkgs=$(to dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n' 'nvidia*' 'libnvidia*' \
        'cuda-drivers*' 'linux-headers*' 'linux-image*' 'linux-modules-nvidia*' 'linux-objects-nvidia*' \
        'docker*' 'containerd*' 'moby*' 'runc' 'dkms' 'cloud-init' 'unattended-upgrades' 'nfs-common' \
        'amazon-efs-utils' 2>/dev/null)
elif have rpm; then
    pkgtool=rpm
    pkgs=$(to rpm -qa --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{ARCH}\n' 'nvidia*' 'kmod-nvidia*' 'libnvidia*' \
        'cuda-drivers*' 'kernel*' 'docker*' 'containerd*' 'moby*' 'runc' 'dkms' 'cloud-init' 'nfs-utils' \
        'amazon-efs-utils' 2>/dev/null)
fi
sec raw "packages $pkgtool"
[[ -n $pkgs ]] && prefix_lines <<<"$pkgs"

# ---------------------------------------------------------------- NVIDIA PCI devices (sysfs)
vendor=""
for d in /sys/bus/pci/devices/*; do
    rd vendor "$d/vendor"
    [[ $vendor == 0x10de ]] || continue
    slot=${d##*/}
    sec kv "pci $slot"
    for f in device class subsystem_vendor subsystem_device current_link_speed max_link_speed \
        current_link_width max_link_width numa_node; do
        rd v "$d/$f"
        kv "$f" "$v"
    done
    drv=""
    if [[ -e $d/driver ]]; then
        for x in /sys/bus/pci/drivers/*/"$slot"; do
            drv=${x%/*}
            drv=${drv##*/}
            break
        done
    fi
    kv driver "$drv"
done

# ---------------------------------------------------------------- NVIDIA driver state
raw_file /proc/driver/nvidia/version
sec kv nvidia
rd v /sys/module/nvidia/version
kv module_version "$v"
if [[ -r /proc/modules ]]; then
    while read -r name _; do
        case $name in nvidia | nvidia_* | nouveau) kv module "$name" ;; esac
    done </proc/modules
fi
v=""
have nvidia-smi && v=$(command -v nvidia-smi)
kv nvidia_smi "$v"
if have grep; then
    while IFS= read -r f; do kv blacklist_nouveau "$f"; done < <(grep -rlsE --include='*.conf' \
        '^[[:space:]]*blacklist[[:space:]]+nouveau([[:space:]]|$)' \
        /etc/modprobe.d /usr/lib/modprobe.d /lib/modprobe.d /run/modprobe.d 2>/dev/null </dev/null)
fi
if have dkms; then
    sec raw dkms
    to dkms status 2>/dev/null | prefix_lines
fi
if have systemctl; then
    sec raw systemctl
    to systemctl show --no-pager -p Id,LoadState,ActiveState,UnitFileState docker.service \
        containerd.service nvidia-fabricmanager.service nvidia-persistenced.service cloud-init.service \
        cloud-final.service unattended-upgrades.service apt-daily.service apt-daily-upgrade.service \
        packagekit.service dnf-makecache.service 2>/dev/null | prefix_lines
fi

# ---------------------------------------------------------------- container runtimes
sec kv containers
for f in docker dockerd containerd nvidia-ctk nvidia-container-runtime nvidia-container-toolkit \
    nvidia-container-cli; do
    have "$f" && kv bin "$f"$'\t'"$(command -v "$f")"
done
if have containerd; then
    kv containerd_version "$(to containerd --version 2>/dev/null)"
fi
if have dockerd && [[ $pkgs != *docker* && $pkgs != *moby* ]]; then
    kv dockerd_version "$(to dockerd --version 2>/dev/null)" # no package: static install
fi
for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do kv cdi "$f"; done
for f in /etc/containerd/conf.d/*; do kv containerd_dropin "$f"; done
v=0
[[ -e /etc/nvidia-container-runtime/config.toml ]] && v=1
kv nvidia_runtime_config "$v"
v=0
[[ -e /etc/containerd/config.toml ]] && v=1
kv containerd_config "$v"
raw_file /etc/docker/daemon.json
if [[ -r /etc/containerd/config.toml ]]; then
    # the file can be long: only lines naming nvidia plus `version =` / `imports =`
    sec raw containerd-config-filtered
    re_keep='^[[:space:]]*(version|imports)[[:space:]]*='
    while IFS= read -r l || [[ -n $l ]]; do
        if [[ $l == *nvidia* || $l =~ $re_keep ]]; then printf '|%s\n' "$l"; fi
    done </etc/containerd/config.toml
fi

# ---------------------------------------------------------------- storage
raw_file /etc/fstab
if [[ -r /proc/self/mounts ]]; then
    # only network/FUSE filesystems and the system mount points; fields as in /proc/mounts
    sec raw mounts
    while read -r src tgt fst opts _; do
        case $fst in
        nfs | nfs4 | cifs | smb3 | lustre | ceph | glusterfs | efs | 9p | virtiofs | fuse | fuse.*) ;;
        *) case $tgt in / | /var | /tmp | /home | /boot | /boot/efi) ;; *) continue ;; esac ;;
        esac
        printf '|%s %s %s %s\n' "$src" "$tgt" "$fst" "$opts"
    done </proc/self/mounts
fi
sec kv disk
paths=()
for p in / /var /tmp; do [[ -d $p ]] && paths+=("$p"); done
if have df && ((${#paths[@]})); then
    mapfile -t dfl < <(to df -P -B1 "${paths[@]}" 2>/dev/null)
    if ((${#dfl[@]} == ${#paths[@]} + 1)); then
        for i in "${!paths[@]}"; do
            read -r _ size _ avail _ <<<"${dfl[i + 1]}"
            kv free "${paths[i]}"$'\t'"$avail"$'\t'"$size"
        done
    fi
fi

end_ns=$(date +%s%N 2>/dev/null </dev/null)
sec kv timing
kv start_ns "$start_ns"
kv end_ns "$end_ns"
printf '@@end\n'
exit 0
