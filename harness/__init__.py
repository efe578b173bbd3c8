"""The development harness: what tests, benchmarks and chaos runs need and users do not.

Not packaged (the wheel holds ``streamdedup`` only); imported from a checkout, where
``scripts/*`` and pytest put the repository root on ``sys.path``. It may import the product;
the product never imports it (tests/test_layout.py checks both).

    broker.py     a single-node KRaft broker from Maven Central jars (scripts/kafka-local)
    redis.py      a local redis-server from Debian's package (scripts/redis-local)
    chaos/        fault injection against real consumer processes (scripts/chaos.py)
    generator.py  seeded Italian job ads with a controlled share of reposts
    edits.py      the near-duplicate edits the generator and the chaos stream share
    soak.py       the retention soak: millions of generated ads through check --retention
    group.py      a consumer group of `run` processes sharing one Redis index (chaos)
    mounts.py     small tmpfs mounts: a disk that fills, or is read-only

Here: the checkout's root, a child's environment, and the command line of a consumer.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from streamdedup.settings import Settings, flag_name

ROOT = Path(__file__).resolve().parents[1]


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that runs ``python -m harness...``: the checkout on its
    ``PYTHONPATH``, since the harness is not installed."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_flags(**settings: object) -> list[str]:
    """``streamdedup run``'s flags for these settings (and ``preset``), each spelled as the
    command spells it (``settings.flag_name``): True a switch, False its ``--no-`` form,
    None left out. The consumers of chaos runs, the group run and two benchmarks wrote
    theirs out by hand."""
    switches = {f.name for f in dataclasses.fields(Settings) if isinstance(f.default, bool)}
    flags: list[str] = []
    for name, value in settings.items():
        if value is None:
            continue
        if name in switches or isinstance(value, bool):  # a cluster's size is a switch too
            flags.append(flag_name(name if value else "no_" + name))
        elif isinstance(value, tuple | list):  # as the settings' comma-separated flags take it
            flags += [flag_name(name), ",".join(map(str, value))]
        else:
            flags += [flag_name(name), str(value)]
    return flags


def run_argv(*extra: str, **settings: object) -> list[str]:
    """``python -m streamdedup run`` with ``run_flags(**settings)`` and ``extra`` after them."""
    return [sys.executable, "-m", "streamdedup", "run", *run_flags(**settings), *extra]
