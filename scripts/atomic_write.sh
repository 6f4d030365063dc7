# Write stdin to a file atomically: temp file in the same directory, validate, back up the old file, rename.
# Arguments: PATH MODE OWNER GROUP EXPECTED_SHA256 BACKUP(1|0) VALIDATE_COMMAND [CONTENT_SHA256]
# EXPECTED_SHA256: "" = no check, "absent" = must not exist yet, else the sha256 the file had when planned.
# VALIDATE_COMMAND: "" or a shell command that gets the new file as $1 (e.g. 'findmnt --verify --tab-file "$1"').
set -eu
# CONTENT_SHA256: the sha256 of the whole new content; stdin cut short (Ctrl-C, a dropped connection) is refused.
path=$1 mode=$2 owner=$3 group=$4 expect=$5 backup=$6 validate=$7 want=${8:-}
# A symlink (config.toml -> /etc/k8s/containerd.toml) stays a symlink: the file it points to is the one rewritten.
if [ -L "$path" ]; then
  target=$(readlink -f -- "$path") || { echo "gpunode: $path is a dangling symlink; not writing it" >&2; exit 7; }
  path=$target
fi
dir=$(dirname -- "$path")
name=$(basename -- "$path")
[ -d "$dir" ] || mkdir -p -- "$dir"
if [ -n "$expect" ]; then
  if [ -e "$path" ]; then now=$(sha256sum < "$path" | cut -d' ' -f1); else now=absent; fi
  if [ "$now" != "$expect" ]; then
    echo "gpunode: $path changed since it was read (expected $expect, found $now); not overwriting" >&2
    exit 3
  fi
fi
tmp=$(mktemp "$dir/.$name.gpunode.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT INT TERM HUP PIPE  # PIPE: stderr is gone when the controller left
cat > "$tmp"
if [ -n "$want" ] && [ "$(sha256sum < "$tmp" | cut -d' ' -f1)" != "$want" ]; then
  echo "gpunode: the new content of $path arrived incomplete; not writing it" >&2
  exit 6
fi
if [ -e "$path" ]; then
  chmod --reference="$path" -- "$tmp"
  chown --reference="$path" -- "$tmp"
else
  chmod 0644 -- "$tmp"  # mktemp made it 0600; a new config file is world-readable unless a mode is given
fi
if [ -n "$mode" ]; then chmod -- "$mode" "$tmp"; fi
if [ -n "$owner" ]; then chown -- "$owner" "$tmp"; fi
if [ -n "$group" ]; then chgrp -- "$group" "$tmp"; fi
if [ -n "$validate" ]; then
  if ! out=$(sh -c "$validate" validate "$tmp" 2>&1); then
    echo "gpunode: the new $path failed validation ($validate): $out" >&2
    exit 4
  fi
fi
if [ "$backup" = 1 ] && [ -e "$path" ]; then
  bak="$path.$(date +%Y%m%d-%H%M%S).gpunode.bak"
  # a backup cut short (disk full) must not stay behind looking like a good one
  cp -p -- "$path" "$bak" || { rm -f -- "$bak"; echo "gpunode: could not back up $path to $bak" >&2; exit 5; }
fi
sync -- "$tmp" 2>/dev/null || sync
mv -f -- "$tmp" "$path"
trap - EXIT INT TERM HUP PIPE
# Only the newest 5 backups of this file are kept (their names sort by time; a glob expands sorted).
if [ "$backup" = 1 ]; then
  set -- "$path".*.gpunode.bak
  if [ -e "$1" ] && [ $# -gt 5 ]; then
    n=$(($# - 5))
    for old; do [ "$n" -gt 0 ] || break; rm -f -- "$old"; n=$((n - 1)); done
  fi
fi
