"""A dump's batch through a store that goes away: `check` and `backfill` wait for it, as
`run` does, and go on once it answers as the same server; a restart stops them.

What the batch becomes depends on where the outage met it:
- while it was judged, or in a commit that did not reach the store: rolled back and
  judged again, with the same verdicts;
- in a commit that reached the store though its reply was lost (``commit_landed``), or
  after the commit: it stands, and its verdicts are the ones judged. Judging it again
  would not give them: with retention the clock had moved, and a review's run gave 399
  of 1,200 verdicts otherwise.
A server that restarted may have come back from an older copy, or empty: then the command
stops (``refuse_a_restart``) and the same command again judges what was lost. Until the
thirty-sixth session any outage stopped them, a network blip too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamdedup.core.verdict import Verdict
from streamdedup.errors import StoreRestartedError, StoreUnavailableError
from streamdedup.store.base import Store, refuse_a_restart

PATIENCE_S = 120.0  # how long one batch waits for its store in all, then stops (exit 1)
FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 8.0


class _Patience:
    """The waits of one batch, doubling, until a deadline on the clock (not a sum of the
    sleeps: a ping to a stalled server can take its 30-s socket timeout)."""

    def __init__(self, say: Callable[[str], None], patience_s: float,
                 sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self.say, self.patience_s, self.sleep, self.clock = say, patience_s, sleep, clock
        self.started: float | None = None
        self.delay = FIRST_WAIT_S

    def until_it_answers(self, store: Store, reason: Exception, what: str) -> None:
        """Wait until the store answers as the server it was; StoreRestartedError if it
        restarted, StoreUnavailableError once the patience is spent."""
        now = self.clock()
        self.started = now if self.started is None else self.started
        while True:
            left = self.started + self.patience_s - now
            if left <= 0:
                raise StoreUnavailableError(
                    f"{reason} (waited {now - self.started:.0f} s for it)")
            step = min(self.delay, left)
            self.say(f"the store does not answer ({reason}); {what} when it does: trying "
                     f"in {step:.1f} s")
            self.sleep(step)
            self.delay = min(2 * self.delay, LONGEST_WAIT_S)
            try:
                store.ping()
                refuse_a_restart(store)
                return
            except StoreRestartedError:
                raise
            except StoreUnavailableError as exc:
                reason = exc
            now = self.clock()


def judged(detector: Any, judge: Callable[[], list[Verdict]], say: Callable[[str], None],
           patience_s: float = PATIENCE_S, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> list[Verdict]:
    """``judge()`` (the detector's ``process_many`` of one batch), the commit, and the
    question whether the server restarted, through outages of up to ``patience_s``."""
    store: Store = detector.store
    patience = _Patience(say, patience_s, sleep, clock)
    while True:
        evicted = getattr(detector, "evicted", None)  # (a shared store's does not evict)
        try:
            found = judge()
            store.commit()
            break
        except StoreRestartedError:
            raise
        except StoreUnavailableError as exc:
            if _landed(store, patience, exc):
                break
            store.rollback()
            if evicted is not None:
                detector.evicted = evicted  # counted again when the batch is
    while True:  # committed: whether the server restarted under it is left to ask
        try:
            refuse_a_restart(store)
            return found
        except StoreRestartedError:
            raise
        except StoreUnavailableError as exc:
            patience.until_it_answers(store, exc, "the batch, committed, is written")


def _landed(store: Store, patience: _Patience, exc: Exception) -> bool:
    """Once the store answers: whether a commit that failed reached it after all."""
    while True:
        patience.until_it_answers(store, exc, "the batch is judged again (unless its commit "
                                              "got through)")
        try:
            return store.commit_landed()
        except StoreUnavailableError as again:
            exc = again
