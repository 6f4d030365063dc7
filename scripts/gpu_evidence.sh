# Evidence for verify-gpu, printed after facts.sh's output in the same exec: nvidia-smi's XML (or its error)
# and the kernel's NVIDIA lines since boot. Sections start with "@@evidence NAME"; "@@exit N" ends a command.
echo "@@evidence nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 60 nvidia-smi -q -x 2>&1
  echo "@@exit $?"
else
  echo "@@missing nvidia-smi"
fi
echo "@@evidence kernel-log"
{ journalctl -k -b --no-pager -o short-iso 2>/dev/null || dmesg 2>/dev/null; } \
  | grep -E 'NVRM|Xid|nvidia|nouveau|fallen off the bus' | tail -n 2000
echo "@@evidence headers"
k=$(uname -r)
if [ -e "/lib/modules/$k/build" ]; then
  echo installed
elif command -v apt-cache >/dev/null 2>&1 && ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
  c=$(apt-cache policy "linux-headers-$k" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
  echo "candidate ${c:-(none)}"
fi
echo "@@evidence end"
