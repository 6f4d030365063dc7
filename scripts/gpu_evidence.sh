# Evidence for verify-gpu, printed after facts.sh's output in the same exec: nvidia-smi's XML (or its error),
# the kernel's NVIDIA lines since boot, the running kernel's nvidia module file and `lspci -vv` of the NVIDIA devices. Sections start with
# "@@evidence NAME"; "@@exit N" ends a command.
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
echo "@@evidence modules"
# the nvidia module file of the running kernel (a precompiled package's, DKMS's or the runfile's), whatever dkms says
modinfo -k "$k" -n nvidia 2>/dev/null || find "/lib/modules/$k" -name 'nvidia.ko*' 2>/dev/null | head -n 1
echo "@@evidence lspci-vv"
# PCIe link (LnkCap vs LnkSta) and AER state of the NVIDIA devices; the capabilities need root (sudo -n: never asks)
if command -v lspci >/dev/null 2>&1; then
  { sudo -n lspci -vv -d 10de: 2>/dev/null || lspci -vv -d 10de: 2>/dev/null; } | head -n 4000
fi
echo "@@evidence kernel-guard"
# what gpunode's kernel guard recorded when a kernel was installed without its module (kernel_guard step)
cat /var/lib/gpunode/kernel-guard.state 2>/dev/null
echo "@@evidence end"
