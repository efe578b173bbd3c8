#!/usr/bin/env python3
"""Replay a dump through Kafka and the consumer and write a quality report.

Usage: python scripts/replay.py --dump PATH [--preset NAME] [--bootstrap-servers HOST:PORT]
       --report-dir DIR [--monitor]  (all options: --help; the work is `streamdedup replay`'s)

The same as `streamdedup replay`, except that without --bootstrap-servers (or
STREAMDEDUP_BOOTSTRAP_SERVERS) it starts a local broker from the development harness
(harness/broker.py, the jars `scripts/setup` fetched) for this replay and stops it afterwards.
With --monitor (``scripts/demo --monitor``) the dashboard of the replay's topics starts before
the replay (http://127.0.0.1:8088/; --monitor-port and the other settings flags given are its
too, so it explains with the replay's preset) and keeps running after it until Ctrl-C; the
broker stays up meanwhile. A monitor that cannot start (its port taken) stops the script
before the replay, with the monitor's own error and exit status.
"""

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import fields
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is not installed: it lives in the checkout

from harness.broker import LocalBroker  # noqa: E402
from streamdedup.cli import main  # noqa: E402
from streamdedup.cli.replay import replay_command  # noqa: E402
from streamdedup.settings import (  # noqa: E402
    Settings,
    build_settings,
    env_name,
    field_name,
    flag_name,
)


def run(argv: list[str], command: click.Command = main) -> int:
    try:
        command.main(args=argv, prog_name="scripts/replay.py")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


# The replay's topics, prefixed: the monitor is given them apart.
_TOPICS = ("--input-topic", "--output-topic", "--dlq-topic", "--bootstrap-servers")


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of a flag taking one, as ``--flag value`` or ``--flag=value``; the last
    given, as click takes it."""
    found = None
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
        elif arg == flag and i + 1 < len(args):
            found = args[i + 1]
    return found


def without(args: list[str], flag: str) -> list[str]:
    """``args`` less a flag taking one value, in either spelling."""
    out, i = [], 0
    while i < len(args):
        if args[i] == flag:
            i += 2
            continue
        if not args[i].startswith(flag + "="):
            out.append(args[i])
        i += 1
    return out


def settings_flags(args: list[str]) -> list[str]:
    """The flags of ``args`` that are settings (``--preset`` too), with their values, as
    ``--flag value`` or ``--flag=value``: the monitor explains with the replay's settings
    (``--preset=reference`` was left behind, and the page measured pairs with the default)
    and serves on its --monitor-host and --monitor-port (they went to the replay, unused)."""
    switches = {flag_name(p + f.name) for f in fields(Settings)
                if isinstance(f.default, bool) for p in ("", "no_")}
    valued = {"--preset"} | {flag_name(f.name) for f in fields(Settings)
                             if not isinstance(f.default, bool)}
    out, i = [], 0
    while i < len(args):
        flag = args[i].split("=", 1)[0]
        takes = 1 if flag in switches or "=" in args[i] else 2
        if flag in (switches | valued) - set(_TOPICS):
            out += args[i:i + takes]
        i += takes if flag in switches | valued else 1
    return out


def start_monitor(bootstrap: str, args: list[str]) -> subprocess.Popen[str] | int:
    """The monitor of the replay's topics, started before the replay so that its page shows
    the replay as it runs; its exit status if it stops at once (a port in use)."""
    prefix = flag_value(args, "--topic-prefix") or ""
    base = build_settings(env=os.environ)
    topics = []  # the replay's: its prefix and each topic flag given, or the environment's
    for flag in _TOPICS[:3]:
        name = flag_value(args, flag) or getattr(base, field_name(flag))
        topics += [flag, prefix + name]
    monitor = subprocess.Popen(
        [sys.executable, "-m", "streamdedup", "monitor", "--bootstrap-servers", bootstrap,
         *settings_flags(args), *topics],
        stderr=subprocess.PIPE, text=True, cwd=ROOT)
    serving = threading.Event()

    def pass_on() -> None:  # its lines, to ours: "monitor on http://...", its warnings
        assert monitor.stderr is not None
        for line in monitor.stderr:
            sys.stderr.write(line)
            if "monitor on http" in line:  # a plain line, or a JSON one (--log-json)
                serving.set()

    threading.Thread(target=pass_on, daemon=True).start()
    while not serving.wait(0.1):
        if monitor.poll() is not None:  # its error was passed on
            time.sleep(0.2)  # its last line, through the thread
            return monitor.returncode or 1
    return monitor


def replay_then_monitor(bootstrap: str, args: list[str], monitor: bool) -> int:
    """The replay; with ``monitor``, the dashboard of its topics from before it starts until
    Ctrl-C after it ended."""
    watching = start_monitor(bootstrap, args) if monitor else None
    if isinstance(watching, int):
        return watching
    try:
        code = run(["replay", "--bootstrap-servers", bootstrap, *args])
        if watching is not None and watching.poll() is None:
            print(f"replay: finished (exit {code}); the monitor goes on (Ctrl-C ends it)",
                  file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):  # the monitor's end, not the replay's
                watching.wait()
        return code
    finally:
        if watching is not None and watching.poll() is None:
            watching.terminate()  # a stop (exit 0), as Ctrl-C is to it
            watching.wait(timeout=30)


if __name__ == "__main__":
    args = sys.argv[1:]
    monitor = "--monitor" in args
    args = [a for a in args if a != "--monitor"]
    if monitor and flag_value(args, "--topic-prefix") is None:
        args += ["--topic-prefix", f"demo-{int(time.time())}."]
    given = flag_value(args, "--bootstrap-servers")
    env = os.environ.get(env_name("bootstrap_servers"))
    if "--help" in args or "-h" in args:  # its usage as typed: no "replay" after the script
        # the command's "It needs a running broker" is not true of this script
        help_text, needs = replay_command.help or "", "It needs a running broker ("
        if needs in help_text:
            start = help_text.index(needs)
            end = help_text.index(").", start) + 2
            replay_command.help = (help_text[:start] + "Without --bootstrap-servers (or its "
                                   "variable) it starts a local broker of its own and stops "
                                   "it afterwards." + help_text[end:])
        code = run(args, replay_command)
        try:
            print("\nscripts/replay.py adds: without --bootstrap-servers a local broker of its "
                  "own; --monitor: the monitor of the replay's topics, from before the replay "
                  "until Ctrl-C (its --monitor-host, --monitor-port and settings flags are "
                  "taken from these).", flush=True)
        except BrokenPipeError:  # `| head`: the rest is not wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(code)
    if given or env:
        sys.exit(replay_then_monitor(given or env or "", without(args, "--bootstrap-servers"),
                                     monitor))
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
