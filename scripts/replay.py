#!/usr/bin/env python3
"""Replay a dump through Kafka and the consumer and write a quality report.

Usage: python scripts/replay.py --dump PATH [--preset NAME] [--bootstrap-servers HOST:PORT]
       --report-dir DIR   (all options: --help; the work is done by streamdedup.replay)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, too

from streamdedup.replay import main

if __name__ == "__main__":
    sys.exit(main(prog_name="scripts/replay.py"))
