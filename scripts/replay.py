#!/usr/bin/env python3
"""Replay a dump through Kafka and the consumer and write a quality report.

Usage: python scripts/replay.py --dump PATH [--preset NAME] [--bootstrap-servers HOST:PORT]
       --report-dir DIR   (all options: --help; the work is `streamdedup replay`'s)

The same as `streamdedup replay`, except that without --bootstrap-servers (or
STREAMDEDUP_BOOTSTRAP_SERVERS) it starts a local broker from the development harness
(harness/broker.py, the jars `scripts/setup` fetched) for this replay and stops it afterwards.
"""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is not installed: it lives in the checkout

from harness.broker import LocalBroker  # noqa: E402
from streamdedup.cli import main  # noqa: E402


def run(argv: list[str]) -> int:
    try:
        main(args=argv, prog_name="scripts/replay.py")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    given = any(a.split("=")[0] == "--bootstrap-servers" for a in args)
    if given or os.environ.get("STREAMDEDUP_BOOTSTRAP_SERVERS") or "--help" in args or "-h" in args:
        sys.exit(run(["replay", *args]))
    with tempfile.TemporaryDirectory(prefix="streamdedup-replay-broker-") as state:
        print("replay: starting a local Kafka broker", file=sys.stderr)
        with LocalBroker(Path(state), die_with_parent=True) as broker:
            print(f"replay: broker ready on {broker.bootstrap}", file=sys.stderr)
            sys.exit(run(["replay", "--bootstrap-servers", broker.bootstrap, *args]))
