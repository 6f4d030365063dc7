"""Named parsers of probe and command output: text in, small data out, each tested on its own; shared by facts,
steps and verify. nvidia-smi (smi_*), dcgmi, lspci, kernel logs (tested on tests/data/captures); nvidia-smi's
MIG listings (mig: tests/test_parsers_mig.py on tests/data/nvidia/mig); systemctl
(systemd), dpkg-query/rpm/apt lists (packages), apt-mark/versionlock holds (holds), `dkms status` (dkms),
container tool versions (containers), /proc/driver/nvidia/version (nvidia_version), /proc/cmdline (cmdline),
/proc/mounts (mounts), facts.sh lock holders (locks): tested on real outputs in tests/parsers/."""
