"""GPU-stack knowledge: package names per distro, kernel flavours, open vs proprietary kernel modules."""
