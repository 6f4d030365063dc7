# A support bundle of GPU evidence: every file is one `gpunode diagnose` understands (or lists as not
# applicable). Prints a base64 tar.gz. gpunode-evidence.txt is the same facts + evidence verify-gpu reads.
set -u
dir=$(mktemp -d /tmp/gpunode-collect.XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() { name=$1; shift; "$@" > "$dir/$name" 2>&1 || true; }
note() { echo "# gpunode-collect: $2" > "$dir/$1"; }
if command -v nvidia-smi >/dev/null 2>&1; then
  run nvidia-smi-q-x.xml timeout 60 nvidia-smi -q -x
  run nvidia-smi-q.txt timeout 60 nvidia-smi -q
  run nvidia-smi.txt timeout 60 nvidia-smi
else
  echo "nvidia-smi: command not found" > "$dir/nvidia-smi-missing.txt"
fi
if command -v lspci >/dev/null 2>&1; then run lspci-nn.txt lspci -nn; else note lspci-nn.txt "lspci is not installed"; fi
{ journalctl -k -b --no-pager -o short-iso 2>/dev/null || dmesg 2>/dev/null; } > "$dir/kernel-log.txt"
[ -s "$dir/kernel-log.txt" ] || note kernel-log.txt "no kernel log readable (journalctl -k and dmesg gave nothing)"
if command -v dkms >/dev/null 2>&1; then run dkms-status.txt dkms status; fi
[ -s "$dir/dkms-status.txt" ] 2>/dev/null || note dkms-status.txt "dkms lists no module (or is not installed)"
run uname.txt uname -a
cat /proc/driver/nvidia/version > "$dir/proc-driver-nvidia-version.txt" 2>/dev/null \
  || note proc-driver-nvidia-version.txt "no /proc/driver/nvidia/version: the nvidia module is not loaded"
cp /etc/docker/daemon.json "$dir/docker-daemon.json" 2>/dev/null || true
if declare -F gpunode_evidence >/dev/null; then gpunode_evidence > "$dir/gpunode-evidence.txt" 2>/dev/null; fi
tar czf - -C "$dir" . | base64 -w0
