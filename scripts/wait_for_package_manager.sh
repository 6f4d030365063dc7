# Wait until no process holds the package manager's locks (cloud-init, unattended-upgrades, apt-daily, dnf
# makecache...). Arguments: TIMEOUT_SECONDS. Exit 0 when free; 1 on timeout, naming the holder.
set -u
timeout=$1
locks="/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock
/var/lib/rpm/.rpm.lock /var/cache/dnf/metadata_lock.pid /var/run/yum.pid"
holders() {
  for fd in /proc/[0-9]*/fd/*; do
    target=$(readlink "$fd" 2>/dev/null) || continue
    for lock in $locks; do
      if [ "$target" = "$lock" ]; then
        pid=${fd#/proc/}; pid=${pid%%/*}
        echo "$lock held by pid $pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120))"
      fi
    done
  done
}
run_by_cloud_init() {  # cloud-init is an ancestor (user data, runcmd): it finishes only after we do
  pid=$$
  while [ "${pid:-0}" -gt 1 ]; do
    case $(cat "/proc/$pid/comm" 2>/dev/null) in cloud-init*) return 0 ;; esac
    ppid=""
    while read -r key value; do
      [ "$key" = "PPid:" ] && { ppid=$value; break; }
    done < "/proc/$pid/status" 2>/dev/null
    pid=$ppid
  done
  return 1
}
waited=0
if command -v cloud-init >/dev/null 2>&1 && [ -d /run/cloud-init ] && [ ! -e /run/cloud-init/result.json ]; then
  if run_by_cloud_init; then
    echo "run by cloud-init itself (user data): not waiting for cloud-init to finish"
  else
    echo "waiting for cloud-init to finish"
    timeout "$timeout" cloud-init status --wait >/dev/null 2>&1 || true
  fi
fi
while :; do
  found=$(holders)
  [ -z "$found" ] && { echo "package manager free after ${waited}s"; exit 0; }
  if [ "$waited" -ge "$timeout" ]; then
    echo "still locked after ${timeout}s:" >&2
    echo "$found" | sort -u >&2
    exit 1
  fi
  sleep 2
  waited=$((waited + 2))
done
