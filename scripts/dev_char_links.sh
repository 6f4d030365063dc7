# Every NVIDIA character device (/dev/nvidia*, /dev/nvidia-caps/*) and whether /dev/char/MAJOR:MINOR leads to it:
# one line each, `node PATH MAJOR:MINOR ok|missing|wrong`. $1: a root to look under ("" for /). $2 = verify: exit 1
# when a link is missing or wrong (the line names it). runc finds a device's node through /dev/char
# (NVIDIA/cloud-native-docs container-toolkit/troubleshooting.md:153).
root=${1:-}
mode=${2:-}
bad=0
for dev in "$root"/dev/nvidia* "$root"/dev/nvidia-caps/*; do
    [ -c "$dev" ] || continue
    nums=$(stat -c '%t %T' "$dev") || continue
    mm=$(printf '%d:%d' "0x${nums% *}" "0x${nums#* }")
    link="$root/dev/char/$mm"
    if [ ! -L "$link" ] && [ ! -e "$link" ]; then
        state=missing
    elif [ -c "$link" ] && [ "$(stat -L -c '%t %T' "$link")" = "$nums" ]; then
        state=ok
    else
        state=wrong
    fi
    [ "$state" = ok ] || bad=1
    echo "node ${dev#"$root"} $mm $state"
done
if [ "$mode" = verify ] && [ "$bad" = 1 ]; then
    echo "some /dev/char links are missing or wrong" >&2
    exit 1
fi
exit 0
