"""What the consumer does when the group moves its partitions: commit first."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kafka import ConsumerRebalanceListener

from streamdedup.service.checkpoint import Checkpoint, CheckpointFailed

log = logging.getLogger("streamdedup.service.consumer")  # the consumer's lines, as before

REVOKE_WAIT_S = 5.0  # the listener waits this long for the loop to park, then skips


class Rebalance(ConsumerRebalanceListener):
    """Before partitions move to another consumer, commit what was done with them.

    kafka-python 3 calls this on its IO thread while the loop is parked in ``poll()`` or
    ``close()``. The store belongs to the loop's thread, so the listener takes it only through
    ``store_in_use``, which the loop lets go of exactly then (the pre-rebalance commit used to
    fail every time: the SQLite connection refused a second thread). The offsets go with
    ``commit_async``: a blocking commit is refused on the IO thread, and the request is
    queued ahead of the group's rejoin. A fenced member (another took its
    ``--group-instance-id``) sends nothing.
    """

    def __init__(self, checkpoint: Checkpoint, lag: Any, store_in_use: threading.Lock,
                 fenced: Callable[[], bool]) -> None:
        self.checkpoint = checkpoint
        self.lag = lag  # the consumer's per-partition lag gauge
        self.store_in_use = store_in_use
        self.fenced = fenced

    def on_partitions_revoked(self, revoked: Any) -> None:
        for tp in revoked:  # another member's to report now (summed, it counted twice)
            with contextlib.suppress(KeyError):
                self.lag.remove(str(tp.partition))
        self.checkpoint.forget(revoked)
        if self.checkpoint.empty or self.fenced():
            return
        if not self.store_in_use.acquire(timeout=REVOKE_WAIT_S):
            log.warning("commit before rebalance skipped (the loop holds the store); %d "
                        "messages will be redelivered", self.checkpoint.messages)
            return
        try:
            done = self.checkpoint.commit(wait=False)
            log.info("committed %d messages before the rebalance", done)
        except CheckpointFailed as exc:
            log.warning("commit before rebalance failed; messages will be redelivered: %s", exc)
        finally:
            self.store_in_use.release()

    def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("assigned %s", sorted(f"{tp.topic}/{tp.partition}" for tp in assigned))
