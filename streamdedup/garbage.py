"""Python's garbage collector, set once for the long-running commands (check, run, backfill).

Our objects are freed by reference counting; the cycle collector finds next to nothing here
but still walks the young objects every 700 container allocations (CPython's default) and
promotes the survivors, so older generations fill up and get walked too. `check` of 50,000
generated ads spent **0.95 s** of its judging process in 863 collections (6 full ones of
~70 ms each: pauses a streaming verdict waits through); settled as below, 0.16 s in 77 (70
of them during start-up, before it), peak memory unchanged (measured with ``gc.callbacks``).
The soak's hot bucket (100,000 messages, BENCHMARKS.md §9b): 10.3 s in 3,461 collections,
26 of them full ones of ~256 ms; settled, 3.5 s and one full collection.
"""

from __future__ import annotations

import gc

# Container allocations between collections of the youngest generation (CPython: 700).
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Collect once, freeze what start-up allocated (modules, Kafka's protocol schemas, the
    stemmer: ~100,000 objects no full collection needs to walk again) and collect the young
    generation less often. Call it when start-up is over; a process forked after it (the
    read-ahead child) inherits the frozen objects and the thresholds."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
