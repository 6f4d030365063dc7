"""`python -m gpunode.docgen`: write docs/ (or `--check` it)."""

import sys

from gpunode.docgen import main

if __name__ == "__main__":
    sys.exit(main())
