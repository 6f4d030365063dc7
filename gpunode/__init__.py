"""gpunode: turn bare cloud GPU instances into ready nodes, over SSH."""

__version__ = "0.1.0"
