"""Named parsers of probe and command output (nvidia-smi, dcgmi, dkms, lspci, kernel logs): text in, data out,
each tested on its own; shared by facts, steps and verify."""
