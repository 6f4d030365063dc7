# A support bundle of GPU evidence: every file is one `gpunode diagnose` understands. Prints a base64 tar.gz.
set -u
dir=$(mktemp -d /tmp/gpunode-collect.XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() { name=$1; shift; "$@" > "$dir/$name" 2>&1 || true; }
if command -v nvidia-smi >/dev/null 2>&1; then
  run nvidia-smi-q-x.xml timeout 60 nvidia-smi -q -x
  run nvidia-smi-q.txt timeout 60 nvidia-smi -q
  run nvidia-smi.txt timeout 60 nvidia-smi
else
  echo "nvidia-smi: command not found" > "$dir/nvidia-smi-missing.txt"
fi
command -v lspci >/dev/null 2>&1 && run lspci-nn.txt lspci -nn
{ journalctl -k -b --no-pager -o short-iso 2>/dev/null || dmesg 2>/dev/null; } > "$dir/kernel-log.txt"
command -v dkms >/dev/null 2>&1 && run dkms-status.txt dkms status
run uname.txt uname -a
cat /proc/driver/nvidia/version > "$dir/proc-driver-nvidia-version.txt" 2>/dev/null || true
cp /etc/docker/daemon.json "$dir/docker-daemon.json" 2>/dev/null || true
tar czf - -C "$dir" . | base64 -w0
