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
#
# Cost: every value that bash can read itself is read without a fork (files with `read`, paths
# of commands from bash's hash table, the user name from /etc/passwd, the clock from
# $EPOCHREALTIME); the commands that remain are run as `$(exec ...)` or `< <(...)`, one process
# each (plus `timeout`). On a Debian VM: systemd-detect-virt, find, awk, dpkg-query, systemctl
# and df, about 10 processes (tests/test_lab_facts_cost.py holds the bound).

set -u
export LC_ALL=C
# bash reads this script from stdin (`bash -s`): external commands that might read stdin get
# </dev/null so none of them can swallow the rest of the script.
PATH="${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
shopt -s nullglob

# now_ns VAR: the clock in ns; bash 5 has $EPOCHREALTIME (microseconds), bash 4 forks date
now_ns() {
    local __t=""
    if ((BASH_VERSINFO[0] >= 5)) && [[ ${EPOCHREALTIME-} == *.* ]]; then
        __t=${EPOCHREALTIME/./}000
    else
        __t=$(exec date +%s%N 2>/dev/null </dev/null)
    fi
    printf -v "$1" '%s' "$__t"
}
start_ns="" end_ns=""
now_ns start_ns

have() { command -v "$1" >/dev/null 2>&1; }
# path_of VAR NAME: what `command -v NAME` prints for a command in PATH, from bash's hash table (no fork)
path_of() {
    local __p=""
    if hash "$2" 2>/dev/null && [[ -n ${BASH_CMDS[$2]-} ]]; then
        __p=${BASH_CMDS[$2]}
    elif have "$2"; then
        __p=$(command -v "$2")
    fi
    printf -v "$1" '%s' "$__p"
}
# a possibly slow command gets a time limit when coreutils timeout exists: "${TO[@]}" prefix
TO=()
have timeout && TO=(timeout 10)

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
# prefix_text TEXT: prefix_lines for text in a variable, without a loop ("" prints nothing)
prefix_text() {
    [[ -n $1 ]] || return 0
    local __nl=$'\n'
    local __t="|${1//$__nl/$__nl|}"
    printf '%s\n' "$__t"
}
# byte_at VAR FILE OFFSET: the byte at OFFSET of FILE as a decimal number, as
# `od -An -tu1 -j OFFSET -N1` prints it ("" when the file is shorter or unreadable); no fork
byte_at() {
    local __seg __pos=0 __val="" __more=1
    if [[ -r $2 ]]; then
        while ((__more)); do
            IFS= read -r -d '' __seg || __more=0
            if ((__pos + ${#__seg} > $3)); then
                printf -v __val '%d' "'${__seg:$3-__pos:1}"
                break
            fi
            __pos=$((__pos + ${#__seg}))
            if ((__more)); then # the NUL that ended the segment
                if ((__pos == $3)); then
                    __val=0
                    break
                fi
                __pos=$((__pos + 1))
            fi
        done 2>/dev/null <"$2"
    fi
    printf -v "$1" '%s' "$__val"
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

# /proc files are read with mapfile (a few reads): `read` line by line seeks back after every
# line, and a seek in a /proc file re-generates it from the start. Lines are split into words
# (no globbing) as `read` with the default IFS would.

printf '@@gpunode-facts 1\n'

# FACTS_WANT: the sections to gather, space-separated (all of them when unset). A run gathers only what its steps
# read (gpunode/facts/sections.py); a section asked for later is gathered then, with `core` left out.
#   core        host, os-release, DMI, kernels, the package tools present (always cheap: no program on most hosts)
#   pkgmgr      package-manager locks and their holders, interrupted transactions, busy processes
#   packages    the one dpkg-query / rpm query (NVIDIA, kernel, container and NFS packages)
#   gpu         NVIDIA PCI functions, driver, modules, nouveau blacklists, dkms status
#   services    systemctl: the units that matter (docker, containerd, fabric manager, apt-daily...)
#   containers  Docker, containerd, the container toolkit, CDI specs
#   storage     fstab, network mounts, free space
#   virt        the VM under a container (`systemd-detect-virt -v`); outside containers core's one call tells it
FACTS_WANT=" ${FACTS_WANT:-core pkgmgr packages gpu services containers storage virt} "
want() { [[ $FACTS_WANT == *" $1 "* ]]; }
virt_c="" virt_v=""
if want core; then

# ---------------------------------------------------------------- host / identity / boot
sec kv host
# the machine (`uname -m`): the kernel's own sysctl (Linux 6.1+), else bash's build machine where it
# names the same thing as uname (x86_64, aarch64: 64-bit userland on a 64-bit kernel), else uname
rd v /proc/sys/kernel/arch
if [[ -z $v ]]; then
    case ${HOSTTYPE-} in
    x86_64 | aarch64) v=$HOSTTYPE ;;
    *) v=$(exec uname -m 2>/dev/null) ;;
    esac
fi
kv arch "$v"
rd v /proc/sys/kernel/hostname
kv hostname "$v"
rd v /proc/sys/kernel/osrelease
kv kernel "$v"
kv uid "${EUID:-}"
# `id -un`: the first /etc/passwd entry of the effective uid (NSS `files`); other sources through id
v=""
if [[ -r /etc/passwd ]]; then
    while IFS=: read -r name _ id _; do
        if [[ $id == "${EUID:-}" && -n $name ]]; then
            v=$name
            break
        fi
    done </etc/passwd
fi
[[ -z $v ]] && v=$(id -un 2>/dev/null </dev/null || printf '%s' "${USER:-}")
kv user "$v"
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
if ! have systemd-detect-virt; then
    want virt || FACTS_WANT+="virt "
else
    # one call tells both outside containers: systemd-detect-virt checks for a container first,
    # then for a VM, so "none" or a VM name means no container; in a container, ask -c and -v
    v=container
    if [[ ! -e /run/systemd/container && ! -e /.dockerenv ]]; then
        v=$(exec systemd-detect-virt 2>/dev/null </dev/null)
    fi
    case $v in
    none | qemu | kvm | amazon | zvm | vmware | microsoft | oracle | powervm | xen | bochs | uml | parallels | \
        bhyve | qnx | acrn | apple | sre | google | vm-other)
        virt_c=none
        virt_v=$v
        want virt || FACTS_WANT+="virt " # told for free
        ;;
    *)
        # what systemd-detect-virt -c answers from (for any process but PID 1), when systemd wrote it
        rd virt_c /run/systemd/container
        [[ -n $virt_c ]] || virt_c=$(exec systemd-detect-virt -c 2>/dev/null </dev/null)
        ;;
    esac
fi
kv virt_container "$virt_c"
rd v /run/systemd/container
kv run_systemd_container "$v"
v=0
[[ -e /.dockerenv ]] && v=1
kv dockerenv "$v"
efi=0
[[ -d /sys/firmware/efi ]] && efi=1
kv efi "$efi"
sb=""
if ((efi)); then # efivarfs: 4 bytes of attributes, then the value; the old sysfs interface: the value
    f=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9
    if [[ -r $f ]]; then
        byte_at sb "$f" 4
    elif [[ -r /sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9/data ]]; then
        byte_at sb /sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0c9ad3aadd9/data 0
    fi
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

fi # core

# ---------------------------------------------------------------- installed packages (one query)
# queried here, printed below: on rpm systems the kernel section reads the running kernel's package
pkgs="" pkgtool=""
if have dpkg-query; then
    pkgtool=dpkg
    # shellcheck disable=SC2016 # ${...} are dpkg-query format fields, not shell
    want packages && pkgs=$(exec ${TO[@]+"${TO[@]}"} dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n' 'nvidia*' \
        'libnvidia*' 'cuda-drivers*' 'linux-headers*' 'linux-image*' 'linux-modules-nvidia*' \
        'linux-objects-nvidia*' 'docker*' 'containerd*' 'moby*' 'runc' 'dkms' 'cloud-init' 'unattended-upgrades' \
        'nfs-common' 'amazon-efs-utils' 2>/dev/null </dev/null)
elif have rpm; then
    pkgtool=rpm
    want packages && pkgs=$(exec ${TO[@]+"${TO[@]}"} rpm -qa --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{ARCH}\n' 'nvidia*' \
        'kmod-nvidia*' 'libnvidia*' 'cuda-drivers*' 'kernel*' 'docker*' 'containerd*' 'moby*' 'runc' 'dkms' \
        'cloud-init' 'nfs-utils' 'amazon-efs-utils' 2>/dev/null </dev/null)
fi

# ---------------------------------------------------------------- kernels and headers
if want core; then
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
# The kernel packages (kernel, kernel6.12 and their -core, -modules* parts) whose VERSION-RELEASE.ARCH is
# the running release are those owners (uname -r of EL, AL2023, Alibaba Cloud Linux kernels); when
# none is, ask rpm who owns the modules directory.
re_kernel_pkg='^kernel[0-9.]*(-core|-modules.*)?$'
if [[ -n $running && -d /lib/modules/$running ]] && [[ $pkgtool == rpm ]]; then
    matched=0
    while IFS=$'\t' read -r name ver arch; do
        if [[ $name =~ $re_kernel_pkg && $ver.$arch == "$running" ]]; then
            kv running_package "$name"
            matched=1
        fi
    done <<<"$pkgs"
    if ((!matched)); then
        while read -r v; do
            [[ $v == kernel* ]] && kv running_package "$v"
        done < <(exec ${TO[@]+"${TO[@]}"} rpm -qf --qf '%{NAME}\n' "/lib/modules/$running" 2>/dev/null </dev/null)
    fi
fi

# ---------------------------------------------------------------- package manager, locks
sec kv pkgmgr
for f in apt-get dnf yum zypper dpkg-query rpm; do have "$f" && kv has "$f"; done
fi # core

if want pkgmgr; then
sec kv pkgmgr
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
# RHEL's content source: a cloud's RHUI (pay-as-you-go images: repo files named *rhui*, no subscription) or
# subscription-manager (a consumer certificate once registered); decides how CodeReady Builder is enabled
for f in /etc/yum.repos.d/*rhui*.repo; do kv rhui_repo "$f"; done
v=0
[[ -e /etc/pki/consumer/cert.pem ]] && v=1
kv rhsm_registered "$v"
path_of v cloud-init
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
    # One find gives the lock files' inode and device (as `stat -c '%i %d %n'`) and, below, the
    # processes that have them open.
    declare -A key_path=()
    found=()
    pids=(/proc/[0-9]*/fd)
    if have find; then
        args=()
        for f in "${fcntl_locks[@]}"; do args+=(-o -lname "$f"); done
        mapfile -t found < <(exec find "${fcntl_locks[@]}" ${pids[@]+"${pids[@]}"} -maxdepth 1 \
            \( \( ! -path '/proc/*' -prune -printf 'L%i %D %p\n' \) -o \
            \( \( -false "${args[@]}" \) -printf 'F%p\t%l\n' \) \) 2>/dev/null </dev/null)
    elif have stat; then
        mapfile -t found < <(exec stat -c 'L%i %d %n' "${fcntl_locks[@]}" 2>/dev/null </dev/null)
    fi
    for l in ${found[@]+"${found[@]}"}; do
        [[ $l == L* ]] || continue
        l=${l#L}
        ino=${l%% *} l=${l#* }
        dev=${l%% *} path=${l#* }
        [[ $ino =~ ^[0-9]+$ && $dev =~ ^[0-9]+$ ]] || continue
        printf -v key '%02x:%02x:%s' $(((dev >> 8) & 0xfff)) $(((dev & 0xff) | ((dev >> 12) & 0xfff00))) "$ino"
        key_path[$key]=$path
    done
    # Reading /proc/locks stops every file lock on the machine for an RCU grace period (the kernel takes its
    # file_rwsem for writing: 10-25 ms of wall time, no CPU), so root, whose fd scan below sees every process of
    # this PID namespace that has a lock file open, does without it.
    if ((${#key_path[@]})) && [[ -r /proc/locks ]] && { [[ ${EUID:-} != 0 ]] || ! have find; }; then
        mapfile -t lines </proc/locks
        set -f
        for l in ${lines[@]+"${lines[@]}"}; do
            # shellcheck disable=SC2206 # words of the line, globbing off (set -f)
            w=($l) # 1: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END
            kind=${w[1]-} pid=${w[4]-} key=${w[5]-}
            [[ $kind == POSIX || $kind == FLOCK || $kind == OFDLCK ]] || continue
            [[ -n ${key_path[$key]+x} ]] && add_holder "${key_path[$key]}" "$pid" locks
        done
        set +f
    fi
    # processes with the lock file open (root sees all, users their own). The fd link text is
    # relative to the process's root, so a candidate counts only if it is the very same file
    # (-ef: same device and inode): apt inside a container must not show up as our holder.
    if have find; then
        for l in ${found[@]+"${found[@]}"}; do
            [[ $l == F* ]] || continue
            l=${l#F}
            fdpath=${l%%$'\t'*} target=${l#*$'\t'}
            pid=${fdpath#/proc/}
            [[ $fdpath -ef $target ]] && add_holder "$target" "${pid%%/*}" fd
        done
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
fi # pkgmgr

# ---------------------------------------------------------------- installed packages (queried above)
if want packages; then
sec raw "packages $pkgtool"
prefix_text "$pkgs"
fi # packages

if want gpu; then
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
    mapfile -t lines </proc/modules
    for l in ${lines[@]+"${lines[@]}"}; do
        l=${l#"${l%%[![:space:]]*}"}
        name=${l%%[[:space:]]*}
        case $name in nvidia | nvidia_* | nouveau) kv module "$name" ;; esac
    done
fi
path_of v nvidia-smi
kv nvidia_smi "$v"
# the files `grep -rlsE --include='*.conf' RE DIR...` names: *.conf files (dot files too) in the
# directories and their subdirectories, symbolic links below the directories skipped, in name order
re_blacklist='^[[:space:]]*blacklist[[:space:]]+nouveau([[:space:]]|$)'
blacklist_scan() {
    local e l
    for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        [[ -L $e ]] && continue
        if [[ -d $e ]]; then
            blacklist_scan "$e"
        elif [[ $e == *.conf && -f $e && -r $e ]]; then
            while IFS= read -r l || [[ -n $l ]]; do
                if [[ $l =~ $re_blacklist ]]; then
                    kv blacklist_nouveau "$e"
                    break
                fi
            done 2>/dev/null <"$e"
        fi
    done
}
for d in /etc/modprobe.d /usr/lib/modprobe.d /lib/modprobe.d /run/modprobe.d; do
    [[ -d $d ]] && blacklist_scan "$d"
done
if have dkms; then
    sec raw dkms
    prefix_text "$(exec ${TO[@]+"${TO[@]}"} dkms status 2>/dev/null </dev/null)"
fi
fi # gpu

if want services && have systemctl; then
    sec raw systemctl
    # systemctl is asked only about units that have a unit file (asking systemd to look for absent units costs
    # more than the rest); an absent one is written as systemctl shows it: not-found, inactive
    present=()
    for u in docker.service containerd.service nvidia-fabricmanager.service nvidia-persistenced.service \
        cloud-init.service cloud-final.service unattended-upgrades.service apt-daily.service \
        apt-daily-upgrade.service packagekit.service dnf-makecache.service; do
        for d in /etc/systemd/system /run/systemd/system /run/systemd/generator /run/systemd/generator.early \
            /run/systemd/generator.late /usr/local/lib/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
            if [[ -e $d/$u || -L $d/$u ]]; then present+=("$u"); continue 2; fi
        done
        prefix_text "Id=$u"$'\n'"LoadState=not-found"$'\n'"ActiveState=inactive"$'\n'"UnitFileState="$'\n'
    done
    if ((${#present[@]})); then
        prefix_text "$(exec ${TO[@]+"${TO[@]}"} systemctl show --no-pager -p Id,LoadState,ActiveState,UnitFileState \
            "${present[@]}" 2>/dev/null </dev/null)"
    fi
fi

# ---------------------------------------------------------------- container runtimes
if want containers; then
sec kv containers
for f in docker dockerd containerd nvidia-ctk nvidia-container-runtime nvidia-container-toolkit \
    nvidia-container-cli; do
    path_of v "$f"
    [[ -n $v ]] && kv bin "$f"$'\t'"$v"
done
if have containerd; then
    kv containerd_version "$(exec ${TO[@]+"${TO[@]}"} containerd --version 2>/dev/null </dev/null)"
fi
if have dockerd && [[ $pkgs != *docker* && $pkgs != *moby* ]]; then # no package: static install
    kv dockerd_version "$(exec ${TO[@]+"${TO[@]}"} dockerd --version 2>/dev/null </dev/null)"
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

fi # containers

# ---------------------------------------------------------------- storage
if want storage; then
raw_file /etc/fstab
if [[ -r /proc/self/mounts ]]; then
    # only network/FUSE filesystems and the system mount points; fields as in /proc/mounts
    sec raw mounts
    mapfile -t lines </proc/self/mounts
    set -f
    for l in ${lines[@]+"${lines[@]}"}; do
        # shellcheck disable=SC2206 # words of the line, globbing off (set -f)
        w=($l)
        src=${w[0]-} tgt=${w[1]-} fst=${w[2]-} opts=${w[3]-}
        case $fst in
        nfs | nfs4 | cifs | smb3 | lustre | ceph | glusterfs | efs | 9p | virtiofs | fuse | fuse.*) ;;
        *) case $tgt in / | /var | /tmp | /home | /boot | /boot/efi) ;; *) continue ;; esac ;;
        esac
        printf '|%s %s %s %s\n' "$src" "$tgt" "$fst" "$opts"
    done
    set +f
fi
sec kv disk
paths=()
for p in / /var /tmp; do [[ -d $p ]] && paths+=("$p"); done
if have df && ((${#paths[@]})); then
    mapfile -t dfl < <(exec ${TO[@]+"${TO[@]}"} df -P -B1 "${paths[@]}" 2>/dev/null </dev/null)
    if ((${#dfl[@]} == ${#paths[@]} + 1)); then
        for i in "${!paths[@]}"; do
            read -r _ size _ avail _ <<<"${dfl[i + 1]}"
            kv free "${paths[i]}"$'\t'"$avail"$'\t'"$size"
        done
    fi
fi
fi # storage

if want virt; then
    if [[ -z $virt_v ]] && have systemd-detect-virt; then
        virt_v=$(exec systemd-detect-virt -v 2>/dev/null </dev/null)
    fi
    sec kv host
    kv virt_vm "$virt_v"
fi

sec kv gathered
for v in $FACTS_WANT; do kv section "$v"; done
now_ns end_ns
sec kv timing
kv start_ns "$start_ns"
kv end_ns "$end_ns"
printf '@@end\n'
exit 0
