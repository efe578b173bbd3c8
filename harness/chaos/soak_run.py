"""The chaos soak, ``run_soak``: one consumer against a backlog produced before it starts, so
that it never waits for input; its highest sustained rate, and its RSS and open fds over time
(``_soak_figures``). Not to be confused with ``harness/soak.py``, the retention soak through
``streamdedup check``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
import time
from collections.abc import Sequence
from typing import Any

from harness.chaos.config import ChaosConfig
from harness.chaos.errors import ChaosError
from harness.chaos.harness import Harness, wait_assigned
from harness.chaos.outcome import check, collect
from harness.chaos.resources import dir_bytes, open_fds, rss_mb
from harness.chaos.stream import build_stream, read_rows, split

# New near-duplicate texts in the soak's stream: a steady mix (0.4, the chaos stream's, is
# the worst case for hot buckets).
SOAK_VARIANT_SHARE = 0.1


def run_soak(config: ChaosConfig, messages: int, variant_share: float = SOAK_VARIANT_SHARE
             ) -> dict[str, Any]:
    """One consumer against a backlog of ``messages``, produced before it starts so that it
    never waits for input: its highest sustained rate, and its RSS and open fds over time
    (they should level off, not grow with the number of messages)."""
    h = Harness(config)
    try:
        # By default a steady state, as in real scrapes: mostly reposts of known ads and few
        # new texts, so that caches fill up and a leak would show as growth after that.
        stream = build_stream(read_rows(config.dump), messages, config.seed + 1,
                              variant_share=variant_share, repost_edit_share=variant_share * 2)
        lane = h.lane("soak")
        config.say(f"soak: producing {len(stream)} messages")
        t0 = time.monotonic()
        for chunk in split(stream, max(1, len(stream) // 5000)):
            h.produce(lane, chunk)
        produced_s = time.monotonic() - t0
        total = len(lane.ids)
        config.say(f"soak: produced in {produced_s:.0f} s; consuming")
        proc = h.launch("soak", h.consumer_argv(lane, config.workdir / "store-soak",
                                                wrapped=False))
        wait_assigned(proc, 120.0)
        h.sampler.track.add(proc.name)  # from here on: imports and start-up are done
        progress: list[tuple[float, int]] = []
        deadline = time.monotonic() + max(600.0, total / 20.0)
        last_say = time.monotonic()
        while True:
            if not proc.alive():
                raise ChaosError(f"soak consumer exited:\n{proc.tail()}")
            done = lane.tally.poll(1000)
            progress.append((time.monotonic(), done))
            if done >= total:
                break
            if time.monotonic() > deadline:
                raise ChaosError(f"soak did not finish: {done}/{total}")
            if time.monotonic() - last_say > 30:
                last_say = time.monotonic()
                config.say(f"soak: {done}/{total} answered, RSS {rss_mb(proc.pid or 0)} MB, "
                           f"fds {open_fds(proc.pid or 0)}")
        h.sampler.sample()
        h.sampler.track.discard(proc.name)  # not the shutdown
        store = config.workdir / "store-soak"
        store_bytes = dir_bytes(store)
        proc.stop()
        with contextlib.closing(sqlite3.connect(f"file:{store / 'index.sqlite'}?mode=ro",
                                                uri=True)) as conn:
            distinct_sets = conn.execute("SELECT count(*) FROM sets").fetchone()[0]
        got = collect(h.cluster, lane.out, lane.dlq)
        result = check(lane.ids, got)
        result.update(_soak_figures(progress, h.sampler.series.get(proc.name, []), total))
        result.update(messages=len(stream), produce_s=round(produced_s, 1),
                      store_mb=round(store_bytes / 2**20, 1), distinct_sets=distinct_sets)
        return result
    finally:
        h.close()


def _soak_figures(progress: Sequence[tuple[float, int]],
                  series: Sequence[tuple[float, float, int]], total: int) -> dict[str, Any]:
    """Rates from answered ids over 10 s windows; RSS and fds at 10% ... 100% of the work."""
    started = next((t for t, n in progress if n > 0), progress[0][0])
    end = progress[-1][0]
    windows: list[float] = []
    j = 0
    for t1, n1 in progress:
        while j < len(progress) and progress[j][0] < t1 + 10.0:
            j += 1
        if j < len(progress) and n1 > 0 and progress[j][1] < total:
            t2, n2 = progress[j]
            windows.append((n2 - n1) / (t2 - t1))

    def at(fraction: float) -> tuple[float, int] | None:
        goal = total * fraction
        moment = next((t for t, n in progress if n >= goal), end)
        near = [s for s in series if s[0] <= moment]
        return (near[-1][1], near[-1][2]) if near else None

    points = {f"{int(f * 100)}%": at(f) for f in (0.1, 0.25, 0.5, 0.75, 1.0)}
    rss = [s[1] for s in series]
    fds = [s[2] for s in series]
    half = [s for s in series if s[0] >= started + (end - started) / 2]
    return {
        "rate_overall": round(total / max(1e-9, end - started), 1),
        "rate_10s_median": round(statistics.median(windows), 1) if windows else None,
        "rate_10s_min": round(min(windows), 1) if windows else None,
        "rate_10s_max": round(max(windows), 1) if windows else None,
        "rss_mb": {k: (round(v[0], 1) if v else None) for k, v in points.items()},
        "fds": {k: (v[1] if v else None) for k, v in points.items()},
        "rss_mb_peak": round(max(rss), 1) if rss else None,
        "rss_mb_growth_second_half": round(half[-1][1] - half[0][1], 1) if len(half) > 1
        else 0.0,
        "fds_min_max": [min(fds), max(fds)] if fds else None,
        "consume_s": round(end - started, 1),
    }
