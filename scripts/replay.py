#!/usr/bin/env python3
"""Replay a dump through Kafka and the consumer and write a quality report.

Usage: python scripts/replay.py --dump PATH [--preset NAME] [--bootstrap-servers HOST:PORT]
       --report-dir DIR [--monitor]  (all options: --help; the work is `streamdedup replay`'s)

The same as `streamdedup replay`, except that without --bootstrap-servers (or
STREAMDEDUP_BOOTSTRAP_SERVERS) it starts a local broker from the development harness
(harness/broker.py, the jars `scripts/setup` fetched) for this replay and stops it afterwards.
With --monitor (``scripts/demo --monitor``) the dashboard of the replay's topics keeps running
after the replay, on http://127.0.0.1:8088/, until Ctrl-C; the broker stays up meanwhile.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is not installed: it lives in the checkout

from harness.broker import LocalBroker  # noqa: E402
from streamdedup.cli import main  # noqa: E402
from streamdedup.settings import build_settings, env_name  # noqa: E402


def run(argv: list[str]) -> int:
    try:
        main(args=argv, prog_name="scripts/replay.py")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def replay_then_monitor(bootstrap: str, args: list[str], monitor: bool) -> int:
    """The replay; then, with ``monitor``, the dashboard of its topics until Ctrl-C."""
    code = run(["replay", "--bootstrap-servers", bootstrap, *args])
    if not monitor:
        return code
    prefix = args[args.index("--topic-prefix") + 1]
    base = build_settings(env=os.environ)
    preset = args[args.index("--preset"):args.index("--preset") + 2] if "--preset" in args else []
    print(f"replay: finished (exit {code}); the monitor of its topics follows (Ctrl-C ends it)",
          file=sys.stderr)
    run(["monitor", "--bootstrap-servers", bootstrap, *preset,
         "--input-topic", prefix + base.input_topic, "--output-topic", prefix + base.output_topic,
         "--dlq-topic", prefix + base.dlq_topic])
    return code


if __name__ == "__main__":
    args = sys.argv[1:]
    monitor = "--monitor" in args
    args = [a for a in args if a != "--monitor"]
    if monitor and "--topic-prefix" not in args:
        args += ["--topic-prefix", f"demo-{int(time.time())}."]
    given = next((a.split("=", 1)[1] if "=" in a else args[i + 1]
                  for i, a in enumerate(args) if a.split("=")[0] == "--bootstrap-servers"), None)
    env = os.environ.get(env_name("bootstrap_servers"))
    if "--help" in args or "-h" in args:
        sys.exit(run(["replay", *args]))
    if given or env:
        args = [a for i, a in enumerate(args) if a.split("=")[0] != "--bootstrap-servers"
                and (i == 0 or args[i - 1] != "--bootstrap-servers")]
        sys.exit(replay_then_monitor(given or env or "", args, monitor))
    try:
        with tempfile.TemporaryDirectory(prefix="streamdedup-replay-broker-") as state:
            print("replay: starting a local Kafka broker", file=sys.stderr)
            with LocalBroker(Path(state), die_with_parent=True) as broker:
                print(f"replay: broker ready on {broker.bootstrap}", file=sys.stderr)
                code = replay_then_monitor(broker.bootstrap, args, monitor)
    except KeyboardInterrupt:  # while the broker started: a traceback, exit 1
        print("replay: interrupted; the local broker is stopped", file=sys.stderr)
        code = 130
    sys.exit(code)
