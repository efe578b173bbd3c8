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
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that runs ``python -m harness...``: the checkout on its
    ``PYTHONPATH``, since the harness is not installed."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
