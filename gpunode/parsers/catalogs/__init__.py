"""Catalogues the parsers classify by: NVIDIA Xid codes, NVRM and module-loader kernel conditions."""
