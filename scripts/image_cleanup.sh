# Before an image is captured: find (probe) or remove (apply) what must not be baked into it.
# Usage: bash -c "$(cat image_cleanup.sh)" image-cleanup probe|apply CATEGORIES [BUILD_KEY_BLOB]
#   CATEGORIES: comma-separated from pkg-cache machine-id ssh-host-keys cloud-init history tmp dhcp udev-net
#               auto-upgrades ecs-state build-key
#   BUILD_KEY_BLOB: the base64 part of the build's public key; its authorized_keys lines are removed.
# probe prints one line per leftover: "CATEGORY<TAB>what"; nothing when the image is clean. apply removes them.
set -u
mode=$1
categories=",$2,"
blob=${3:-}
failed=0

want() { case $categories in *",$1,"*) return 0 ;; esac; return 1; }
found() { printf '%s\t%s\n' "$1" "$2"; }
homes() { { echo /root; getent passwd | awk -F: '$3 >= 1000 && $6 != "/" {print $6}'; } | sort -u; }
run() { "$@" || { echo "failed: $*" >&2; failed=1; }; }

held_debs() { dpkg --get-selections 2>/dev/null | awk '$2 == "hold" {print $1}'; }

nvidia_held() {
    # dpkg, not apt-mark: apt would rebuild /var/cache/apt/*.bin right after pkg-cache removed them
    { held_debs; dnf -q versionlock list 2>/dev/null; yum -q versionlock list 2>/dev/null; } |
        grep -Eq '(^|[^a-z])(nvidia|libnvidia|cuda-drivers|kmod-nvidia)'
}

enabled_units() {
    for unit in apt-daily.timer apt-daily-upgrade.timer unattended-upgrades.service dnf-automatic.timer \
        dnf-automatic-install.timer; do
        state=$(systemctl is-enabled "$unit" 2>/dev/null) || true
        case $state in enabled | enabled-runtime) echo "$unit" ;; esac
    done
}

# What a running system keeps there by itself is no leftover: systemd's and X's sockets and private dirs, and
# cloud-init's scratch dir (made again on every boot; only its contents would be a build's leftovers).
tmp_entries() {
    find /tmp /var/tmp -mindepth 1 -maxdepth 1 ! -name 'systemd-private-*' ! -name '.X11-unix' ! -name '.ICE-unix' \
        ! -name '.XIM-unix' ! -name '.font-unix' ! -name '.Test-unix' ! -name 'snap-private-tmp' \
        ! \( -path /var/tmp/cloud-init -empty \) 2>/dev/null
}

history_files() {
    for home in $(homes); do
        for f in .bash_history .zsh_history .python_history .lesshst .viminfo .wget-hsts .mysql_history; do
            [ -e "$home/$f" ] && echo "$home/$f"
        done
    done
}

key_files() {
    [ -n "$blob" ] || return 0
    for home in $(homes); do
        for f in "$home/.ssh/authorized_keys" "$home/.ssh/authorized_keys2"; do
            [ -f "$f" ] && grep -qF -- "$blob" "$f" && echo "$f"
        done
    done
}

cloud_init_paths() {
    for p in /var/lib/cloud/instance /var/lib/cloud/instances /var/lib/cloud/data /var/lib/cloud/sem \
        /var/log/cloud-init.log /var/log/cloud-init-output.log; do
        [ -e "$p" ] || [ -L "$p" ] && echo "$p"
    done
}

lease_files() {
    for p in /var/lib/dhcp/*.leases /var/lib/dhcp/*.lease /var/lib/dhclient/*.lease* /var/lib/NetworkManager/*.lease \
        /var/lib/dhcpcd/*.lease /var/lib/dhcpcd5/*.lease; do
        [ -f "$p" ] && echo "$p"
    done
}

# The ECS agent's state (registration, task checkpoints): an image carrying it makes every instance the same
# container instance. AWS's custom-AMI guidance: stop the agent and empty /var/lib/ecs/data before imaging.
ecs_state() { find /var/lib/ecs/data -mindepth 1 -maxdepth 1 2>/dev/null; }

probe() {
    if want pkg-cache; then
        n=$(find /var/cache/apt/archives -maxdepth 1 -name '*.deb' 2>/dev/null | wc -l)
        [ "$n" -gt 0 ] && found pkg-cache "/var/cache/apt/archives: $n .deb files"
        n=$(find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock 2>/dev/null | wc -l)
        [ "$n" -gt 0 ] && found pkg-cache "/var/lib/apt/lists: $n files"
        for d in /var/cache/dnf /var/cache/yum; do
            [ -n "$(ls -A "$d" 2>/dev/null)" ] && found pkg-cache "$d is not empty"
        done
        ls /var/cache/apt/*.bin >/dev/null 2>&1 && found pkg-cache "/var/cache/apt/*.bin"
    fi
    if want machine-id; then
        [ -s /etc/machine-id ] && found machine-id "/etc/machine-id is not empty"
        [ -f /var/lib/dbus/machine-id ] && [ ! -L /var/lib/dbus/machine-id ] &&
            found machine-id "/var/lib/dbus/machine-id is a copy"
    fi
    if want ssh-host-keys; then
        for f in /etc/ssh/ssh_host_*key /etc/ssh/ssh_host_*key.pub; do [ -e "$f" ] && found ssh-host-keys "$f"; done
    fi
    if want build-key; then
        for f in $(key_files); do found build-key "$f has the build key"; done
    fi
    if want cloud-init; then
        for p in $(cloud_init_paths); do found cloud-init "$p"; done
    fi
    if want history; then
        for f in $(history_files); do found history "$f"; done
    fi
    if want tmp; then
        n=$(tmp_entries | wc -l)
        [ "$n" -gt 0 ] && found tmp "$n entries in /tmp and /var/tmp"
    fi
    if want dhcp; then
        for f in $(lease_files); do found dhcp "$f"; done
    fi
    if want udev-net; then
        [ -e /etc/udev/rules.d/70-persistent-net.rules ] && found udev-net /etc/udev/rules.d/70-persistent-net.rules
    fi
    if want ecs-state; then
        for p in $(ecs_state); do found ecs-state "$p"; done
    fi
    if want auto-upgrades && nvidia_held; then
        for unit in $(enabled_units); do found auto-upgrades "$unit is enabled while NVIDIA packages are held"; done
    fi
    return 0
}

# sshd must start on the next boot: cloud-init makes new host keys; without it, a unit of ours does.
ensure_host_key_regeneration() {
    command -v cloud-init >/dev/null 2>&1 && return 0
    [ -d /etc/systemd/system ] || return 0
    cat >/etc/systemd/system/gpunode-ssh-host-keys.service <<'UNIT'
# Written by gpunode's image_cleanup: the image was captured without SSH host keys; make them at first boot.
[Unit]
Description=Generate SSH host keys (gpunode image)
Before=ssh.service sshd.service
ConditionPathExistsGlob=!/etc/ssh/ssh_host_*_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
    systemctl enable gpunode-ssh-host-keys.service >/dev/null 2>&1 ||
        ln -sf /etc/systemd/system/gpunode-ssh-host-keys.service \
            /etc/systemd/system/multi-user.target.wants/gpunode-ssh-host-keys.service
}

apply() {
    if want pkg-cache; then
        if command -v apt-get >/dev/null 2>&1; then
            run apt-get -q -o DPkg::Lock::Timeout=600 clean
            find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock -delete
            rm -f /var/cache/apt/*.bin
        fi
        command -v dnf >/dev/null 2>&1 && { dnf -q clean all >/dev/null 2>&1 || true; }
        command -v yum >/dev/null 2>&1 && ! command -v dnf >/dev/null 2>&1 && { yum -q clean all >/dev/null 2>&1 || true; }
        rm -rf /var/cache/dnf/* /var/cache/yum/*
    fi
    if want machine-id; then
        # emptied, not deleted: systemd makes a new id at first boot (a missing file breaks some units)
        run truncate -s 0 /etc/machine-id
        if [ -f /var/lib/dbus/machine-id ] && [ ! -L /var/lib/dbus/machine-id ]; then
            rm -f /var/lib/dbus/machine-id && ln -s /etc/machine-id /var/lib/dbus/machine-id
        fi
    fi
    if want ssh-host-keys; then
        ensure_host_key_regeneration
        rm -f /etc/ssh/ssh_host_*key /etc/ssh/ssh_host_*key.pub
    fi
    if want cloud-init; then
        if command -v cloud-init >/dev/null 2>&1; then
            cloud-init clean --logs >/dev/null 2>&1 || true
        fi
        for p in $(cloud_init_paths); do rm -rf "$p"; done
    fi
    if want history; then
        for f in $(history_files); do rm -f "$f"; done
    fi
    if want tmp; then
        tmp_entries | while IFS= read -r p; do rm -rf "$p"; done
    fi
    if want dhcp; then
        for f in $(lease_files); do rm -f "$f"; done
    fi
    if want udev-net; then
        rm -f /etc/udev/rules.d/70-persistent-net.rules
    fi
    if want auto-upgrades && nvidia_held; then
        for unit in $(enabled_units); do run systemctl disable --now "$unit" >/dev/null 2>&1; done
        if [ -d /etc/apt/apt.conf.d ]; then
            printf '%s\n' '// Written by gpunode: NVIDIA packages are held; no unattended upgrades in this image.' \
                'APT::Periodic::Update-Package-Lists "0";' 'APT::Periodic::Unattended-Upgrade "0";' \
                >/etc/apt/apt.conf.d/20auto-upgrades
        fi
    fi
    if want ecs-state && [ -n "$(ecs_state)" ]; then
        systemctl stop ecs.service >/dev/null 2>&1 || true
        ecs_state | while IFS= read -r p; do rm -rf "$p"; done
    fi
    # last: the build's key. The session that runs this stays open; new logins with that key are refused.
    if want build-key; then
        for f in $(key_files); do
            grep -vF -- "$blob" "$f" >"$f.gpunode-tmp" || true
            if [ -s "$f.gpunode-tmp" ]; then
                chmod --reference="$f" "$f.gpunode-tmp" && chown --reference="$f" "$f.gpunode-tmp" &&
                    mv -f "$f.gpunode-tmp" "$f"
            else
                rm -f "$f" "$f.gpunode-tmp"
            fi
        done
    fi
    sync
    return $failed
}

case $mode in
probe) probe ;;
apply) apply ;;
*) echo "usage: image_cleanup.sh probe|apply CATEGORIES [KEY_BLOB]" >&2; exit 2 ;;
esac
