"""A dump's batch through a store that goes away: `check` and `backfill` wait for it, as
`run` does, and judge the batch again, unless the server restarted meanwhile.

A batch whose commit failed may be in the store or not (the reply was lost): judged again,
it gives the same verdicts either way, since a document already stored gets its stored
verdict. A server that restarted may have come back from an older copy, or empty: then the
command stops (``refuse_a_restart``) and the same command again judges what was lost. Until
the thirty-sixth session any outage stopped them, a network blip too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamdedup.core.verdict import Verdict
from streamdedup.errors import StoreRestartedError, StoreUnavailableError
from streamdedup.store.base import refuse_a_restart

PATIENCE_S = 120.0  # how long a dump's judging waits for its store, then stops (exit 1)
FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 8.0


def judged(detector: Any, judge: Callable[[], list[Verdict]], say: Callable[[str], None],
           patience_s: float = PATIENCE_S,
           sleep: Callable[[float], None] = time.sleep) -> list[Verdict]:
    """``judge()`` (the detector's ``process_many`` of one batch), then the commit, then
    the question whether the server restarted; while the store does not answer, the batch
    is rolled back and judged again once it does, for up to ``patience_s`` in all."""
    store = detector.store
    waited, delay = 0.0, FIRST_WAIT_S
    while True:
        evicted = getattr(detector, "evicted", None)  # (a shared store's does not evict)
        try:
            found = judge()
            store.commit()
            refuse_a_restart(store)
            return found
        except StoreRestartedError:
            raise
        except StoreUnavailableError as exc:
            store.rollback()
            if evicted is not None:
                detector.evicted = evicted  # counted again when the batch is
            reason = exc
        while True:  # until it answers, as the server it was
            if waited >= patience_s:
                raise StoreUnavailableError(f"{reason} (waited {waited:.0f} s for it)")
            step = min(delay, patience_s - waited)
            say(f"the store does not answer ({reason}); the batch is judged again when it "
                f"does: trying in {step:.1f} s")
            sleep(step)
            waited += step
            delay = min(2 * delay, LONGEST_WAIT_S)
            try:
                store.ping()
                refuse_a_restart(store)
                break
            except StoreRestartedError:
                raise
            except StoreUnavailableError as exc:
                reason = exc
