"""``python -m harness.chaos consumer [--trip STAGE] -- run ...``: see ``trips.py``."""

from __future__ import annotations

import sys

from harness.chaos.trips import child_main

if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
