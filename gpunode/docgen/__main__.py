"""`python -m gpunode.docgen`: write docs/ (or `--check` it)."""

import sys

from gpunode.docgen import main

sys.exit(main())
