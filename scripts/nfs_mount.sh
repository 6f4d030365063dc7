# shellcheck shell=bash
# The host side of gpunode's nfs_mount step (bash, run as root). Usage: nfs_mount.sh COMMAND ARGS...
#   probe SERVER PATH V3(1|0) PREFLIGHT(1|0) TIMEOUT   read-only: preflight results and the mount point's state
#   exports SERVER TIMEOUT                              read-only: the server's export list (showmount -e)
#   mount PATH | automount PATH | unmount PATH | write-test PATH   changes; failures print "gpunode: CAUSE"
#                                                                  and "gpunode-fix: FIX" lines on stderr
# Nothing here stats the mount point while a share may be mounted there: a dead server would hang it.
set -u
cmd=${1:-}
shift || true

say() { printf '%s\n' "$*"; }
fail() { # CAUSE FIX [DETAIL]
    printf 'gpunode: %s\n' "$1" >&2
    [ -n "${2:-}" ] && printf 'gpunode-fix: %s\n' "$2" >&2
    [ -n "${3:-}" ] && printf '%s\n' "$3" >&2
    exit 1
}
oneline() { tr '\n' ' ' | sed 's/  */ /g; s/ $//'; }

# /proc/self/mounts escapes blanks and backslashes as octal; the same for the path we look for
escaped() { printf '%s' "$1" | sed 's/\\/\\134/g; s/ /\\040/g; s/\t/\\011/g'; }

mounts_at() { # PATH: "SOURCE FSTYPE OPTIONS" for each mount on PATH, oldest first
    local want src tgt fst opts rest
    want=$(escaped "$1")
    while read -r src tgt fst opts rest; do
        [ "$tgt" = "$want" ] && printf '%s %s %s\n' "$src" "$fst" "$opts"
    done </proc/self/mounts
}

users_of() { # PATH: "PID COMM" for each process with its cwd, root, executable, an open file or a mapping there
    local pids pid
    pids=$({
        find /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/exe /proc/[0-9]*/fd -maxdepth 1 \
            \( -lname "$1" -o -lname "$1/*" \) 2>/dev/null
        grep -lsF " $1/" /proc/[0-9]*/maps 2>/dev/null
    } | cut -d/ -f3 | sort -un)
    for pid in $pids; do
        [ "$pid" = "$$" ] && continue
        printf '%s %s\n' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null || echo '?')"
    done
}

kernel_support() {
    if grep -qwE 'nfs4?' /proc/filesystems 2>/dev/null; then
        say builtin
    elif command -v modprobe >/dev/null 2>&1 && modprobe -n -q nfs 2>/dev/null; then
        say module
    else
        say "none $(uname -r)"
    fi
}

check_port() { # SERVER PORT TIMEOUT
    local out rc
    out=$(timeout "$3" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        say "port $2 open"
    elif [ $rc -eq 124 ]; then
        say "port $2 timeout"
    else
        case $out in
        *refused*) say "port $2 refused" ;;
        *unreachable* | *"No route"*) say "port $2 unreachable $(printf '%s' "$out" | oneline)" ;;
        *) say "port $2 error $(printf '%s' "$out" | oneline)" ;;
        esac
    fi
}

list_exports() { # SERVER TIMEOUT
    local out p c
    if ! command -v showmount >/dev/null 2>&1; then
        say "showmount absent"
        return
    fi
    if ! out=$(timeout "$2" showmount -e --no-headers "$1" 2>&1); then
        say "showmount fail $(printf '%s' "$out" | oneline)"
        return
    fi
    say "showmount ok"
    printf '%s\n' "$out" | while read -r p c; do
        [ -n "$p" ] && say "export $p $c"
    done
}

probe() { # SERVER PATH V3 PREFLIGHT TIMEOUT
    local server=$1 path=$2 v3=$3 preflight=$4 t=$5 addrs open=1 here
    if [ "$preflight" = 1 ]; then
        if addrs=$(timeout "$t" getent ahosts "$server" 2>/dev/null | awk '{print $1}' | sort -u | oneline) \
            && [ -n "$addrs" ]; then
            say "dns ok $addrs"
            for port in 2049 $([ "$v3" = 1 ] && echo 111); do
                line=$(check_port "$server" "$port" "$t")
                say "$line"
                case $line in *" open") ;; *) open=0 ;; esac
            done
            [ "$v3" = 1 ] && [ $open = 1 ] && list_exports "$server" "$t"
        else
            say "dns fail"
        fi
    fi
    say "kernel $(kernel_support)"
    here=$(mounts_at "$path")
    if [ -n "$here" ]; then
        printf '%s\n' "$here" | sed 's/^/mount /'
        users_of "$path" | sed 's/^/user /'
        timeout "$t" getent ahosts "$server" 2>/dev/null | awk '{print "addr " $1}' | sort -u
        ss -ntH state established '( dport = :2049 )' 2>/dev/null | awk '{print "conn " $3 " " $4}'
        say "path dir"
    elif [ -d "$path" ]; then
        say "path dir"
    elif [ -e "$path" ]; then
        say "path other"
    else
        say "path missing"
    fi
    if [ -d /run/systemd/system ]; then say "systemd yes"; else say "systemd no"; fi
    if findmnt --help 2>&1 | grep -q -- '--verify'; then
        say "findmnt verify"
    elif command -v findmnt >/dev/null 2>&1; then
        say "findmnt plain"
    else
        say "findmnt absent"
    fi
}

require_kernel_nfs() {
    local out
    grep -qwE 'nfs4?' /proc/filesystems 2>/dev/null && return 0
    out=$(modprobe nfs 2>&1) && return 0
    fail "this kernel has no NFS client (nfs module missing): $(uname -r) lists no nfs in /proc/filesystems and modprobe nfs failed: $(printf '%s' "$out" | oneline)" \
        "install the kernel's NFS module (Ubuntu: linux-modules-extra-$(uname -r)), boot a kernel with CONFIG_NFS_FS, or use fstab_only"
}

explain_mount_error() { # PATH OUTPUT
    case $2 in
    *"No such device"* | *"unknown filesystem type"*)
        fail "this kernel has no NFS client (nfs module missing): mount $1 said: $(printf '%s' "$2" | oneline)" \
            "install the kernel's NFS module (Ubuntu: linux-modules-extra-$(uname -r)) or boot a kernel with CONFIG_NFS_FS" ;;
    *"access denied by server"*)
        fail "the server refused this host (access denied) when mounting $1" \
            "allow this host's address in the NAS permission group / the export's client list" "$2" ;;
    *"reason given by server: No such file"* | *"No such file or directory"*)
        fail "the server has no such export for $1 (No such file or directory)" \
            "check the export path (showmount -e SERVER lists NFSv3 exports; for NFSv4 it is the path under /)" "$2" ;;
    *"timed out"* | *"Connection refused"* | *"No route to host"*)
        fail "the NFS server did not answer while mounting $1" \
            "check the security group / firewall for TCP 2049 (and 111 for NFSv3)" "$2" ;;
    *"not supported"*)
        fail "the server does not support the requested NFS version or transport for $1" \
            "pick another nfs_version (the vendor's documented one)" "$2" ;;
    *)
        fail "mount $1 failed" "read the mount output above; the fstab line is the one gpunode planned" "$2" ;;
    esac
}

do_mount() { # PATH: mount it from its fstab line
    local out
    require_kernel_nfs
    if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1; fi
    out=$(mount "$1" 2>&1) || explain_mount_error "$1" "$out"
}

do_automount() { # PATH: (re)arm the systemd automount unit from fstab and trigger it once
    local unit out
    require_kernel_nfs
    [ -d /run/systemd/system ] || fail "x-systemd.automount needs systemd, which is not running here" \
        "use automount: false on hosts without systemd"
    unit=$(systemd-escape -p --suffix=automount "$1")
    systemctl daemon-reload
    out=$(systemctl restart "$unit" 2>&1) || fail "systemctl restart $unit failed" \
        "see journalctl -u $unit" "$out"
    timeout 120 ls "$1" >/dev/null 2>&1
    if ! mounts_at "$1" | grep -qv ' autofs '; then
        out=$(journalctl -q -n 5 -u "$(systemd-escape -p --suffix=mount "$1")" 2>/dev/null)
        explain_mount_error "$1" "automount armed, but accessing $1 did not mount the share: $out"
    fi
}

do_unmount() { # PATH: unmount everything on PATH (the automount too), refusing while it is in use
    local busy out i
    busy=$(users_of "$1" | oneline)
    [ -n "$busy" ] && fail "$1 is busy, not unmounting it; in use by (pid command): $busy" \
        "stop those processes (or let them finish), then run again"
    if [ -d /run/systemd/system ]; then
        systemctl stop "$(systemd-escape -p --suffix=automount "$1")" >/dev/null 2>&1
    fi
    for i in 1 2 3; do
        [ -n "$(mounts_at "$1")" ] || return 0
        out=$(umount "$1" 2>&1) || fail "umount $1 failed (try $i)" "see which processes use it: fuser -vm $1" "$out"
    done
    [ -z "$(mounts_at "$1")" ] || fail "$1 is still mounted after three umounts" "unmount it by hand"
}

write_test() { # PATH: write a file on the share, read it back, remove it
    local file="$1/.gpunode-write-test.$$"
    timeout 60 sh -c 'echo "gpunode $2" > "$1" && [ "$(cat "$1")" = "gpunode $2" ] && rm -f "$1"' \
        write-test "$file" "$$" 2>/dev/null ||
        fail "could not write, read back and delete $file on the share" \
            "check the export is read-write for this host and root is not squashed (or test as a user who may write)"
}

case $cmd in
probe) probe "$@"; true ;;
exports) list_exports "$@"; true ;;
mount) do_mount "$@" ;;
automount) do_automount "$@" ;;
unmount) do_unmount "$@" ;;
write-test) write_test "$@" ;;
*) echo "usage: nfs_mount.sh probe|exports|mount|automount|unmount|write-test ARGS" >&2; exit 2 ;;
esac
