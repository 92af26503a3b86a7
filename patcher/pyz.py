"""`python3 -m patcher.pyz`: the single file's build command, as the docs print it (patcher.cli.pyz)."""

from __future__ import annotations

import sys

from patcher.cli.pyz import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
