# Evidence for image_validate, before capture: the kernel that will boot and the NVIDIA modules built for it.
# Usage: bash -c "$(cat image_validate.sh)" image-validate SECTION
# Prints one section (each is a probe section of its own, see gpunode/steps/probe.py): "boot-kernel" (one line),
# "dkms" (`dkms status -k KERNEL`), "modules" (nvidia*.ko* files of that kernel), "held" (held packages), "ecs" (the
# ECS agent AWS Batch needs: "enabled STATE", "program PATH yes|no", "config yes|no", "conf FILE<TAB>LINE" for the GPU
# and runtime lines of the ECS config files (parsed as ecs-init does, in Python), "state FILE" for agent state that
# would make every instance of the image the same container instance, "runtimes NAME..." from `docker info` (or
# "docker missing" / "docker down")).
set -u

boot_kernel() {
    k=""
    if command -v grubby >/dev/null 2>&1; then
        k=$(grubby --default-kernel 2>/dev/null) || k=""
        k=${k#/boot/vmlinuz-}
    fi
    if [ -z "$k" ]; then
        # Debian/Ubuntu GRUB boots the newest installed kernel unless told otherwise
        k=$(find /boot -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V | tail -n 1)
    fi
    [ -n "$k" ] || k=$(uname -r) # no kernel in /boot: a container, whose kernel is the host's
    echo "$k"
}

ecs() {
    echo "enabled $(systemctl is-enabled ecs.service 2>/dev/null || echo missing)"
    program=$(systemctl show -p ExecStart --value ecs.service 2>/dev/null | sed -n 's/.*path=\([^ ;]*\).*/\1/p' | head -n 1)
    if [ -n "$program" ]; then
        if [ -x "$program" ]; then echo "program $program yes"; else echo "program $program no"; fi
    fi
    # ecs-init reads the AMI's /var/lib/ecs/ecs.config (where the ECS GPU AMI's build sets ECS_ENABLE_GPU_SUPPORT,
    # see aws/amazon-ecs-ami) and the user's /etc/ecs/ecs.config; the last value found wins here, /etc's.
    configs=""
    for f in /var/lib/ecs/ecs.config /etc/ecs/ecs.config; do [ -f "$f" ] && configs="$configs $f"; done
    if [ -n "$configs" ]; then
        echo "config yes"
        for f in $configs; do
            grep -E '^[[:space:]]*ECS_(ENABLE_GPU_SUPPORT|NVIDIA_RUNTIME)' "$f" | head -n 20 | sed "s|^|conf $f	|"
        done
    else
        echo "config no"
    fi
    find /var/lib/ecs/data -mindepth 1 -maxdepth 1 2>/dev/null | head -n 5 | sed 's/^/state /'
    # the runtimes Docker really has: the ECS agent runs each GPU container with the one named by ECS_NVIDIA_RUNTIME
    if ! command -v docker >/dev/null 2>&1; then
        echo "docker missing"
    elif runtimes=$(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null); then
        echo "runtimes $runtimes"
    else
        echo "docker down"
    fi
}

case "${1:-}" in
boot-kernel) boot_kernel ;;
dkms) if command -v dkms >/dev/null 2>&1; then dkms status -k "$(boot_kernel)" 2>/dev/null; fi ;;
modules) find "/lib/modules/$(boot_kernel)" -name 'nvidia*.ko*' 2>/dev/null | head -n 20 ;;
held)
    { dpkg --get-selections 2>/dev/null | awk '$2 == "hold" {print $1}'; dnf -q versionlock list 2>/dev/null; } |
        head -n 200 # dpkg, not apt-mark, which would rebuild the apt caches just cleaned
    ;;
ecs) ecs ;;
*)
    echo "usage: image-validate boot-kernel|dkms|modules|held|ecs" >&2
    exit 2
    ;;
esac
exit 0
