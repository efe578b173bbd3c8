"""The consumer's second process: it sketches the next part of a batch while the detector
judges the current one.

Why: on fresh ads reading and sketching (normalize, shingle, sign) are about half of
``check``'s CPU (7.0-7.6 s against the judging process's 8.6 s for 50,000 ads, BENCHMARKS.md),
and they meet the detector only in the sketches. In the consumer the rest (detector, store,
decoding, records, Kafka) weighs more, so the gain is smaller: 1.13x in
process, ~1.14x through a real broker (BENCHMARKS.md §9c). A batch of at least
``2 * CHUNK`` (300) documents is judged in chunks; all chunks go to the worker at once, and the
detector takes chunk i's sketches as soon as they are ready, while the worker goes on with
chunk i + 1. Verdicts are the same: a sketch is a function of the text alone, and chunks
of a batch see each other as the batch does (``Detector.process_many``). Small batches (a
slow stream) are judged at once, in process: waiting for the worker would only add latency.

The worker is spawned, not forked: the consumer holds the store's lock and files, Kafka
sockets and threads, none of which a child may inherit. A worker that fails, dies or does
not answer in ``TIMEOUT_S`` is said once in the log and not used again: the rest is
sketched in process. One left behind by a consumer killed with SIGKILL sees its parent
gone within a second and exits.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

from streamdedup import heap
from streamdedup.core.sketch import Packed, Sketcher, Sketches, pack, unpack
from streamdedup.settings import Settings

log = logging.getLogger(__name__)

# A batch of 500 as 50 + 150 + 150 + 150: the detector waits for the first 50 only (with
# four equal chunks, waiting for the first was a tenth of the consumer's time).
FIRST_CHUNK = 50
CHUNK = 150
TIMEOUT_S = 60.0

_sketcher: Sketcher | None = None
_signed: set[int] = set()


class SketchWorker:
    """Sketches in a spawned process; ``chunks`` of documents' fields in, sketches out."""

    def __init__(self, settings: Settings) -> None:
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            1, mp_context=mp.get_context("spawn"), initializer=_start,
            initargs=(settings, os.getpid()))
        # Started now (~1 s: an interpreter, numpy, the stemmer), while the consumer
        # connects, rather than at the first big batch, which would wait for it.
        self._pool.submit(_sketch, [])

    @property
    def alive(self) -> bool:
        return self._pool is not None

    def submit(self, chunks: Sequence[Sequence[Mapping[str, str]]]
               ) -> list[Future[Packed]] | None:
        """One future per chunk, in order; None once the worker is gone."""
        if self._pool is None:
            return None
        try:
            return [self._pool.submit(_sketch, [dict(f) for f in chunk]) for chunk in chunks]
        except Exception as exc:  # a broken pool refuses new work
            self._give_up(exc)
            return None

    def result(self, future: Future[Packed]) -> Sketches | None:
        """A chunk's sketches, or None (then the detector sketches it itself)."""
        if self._pool is None:
            return None
        try:
            return unpack(future.result(timeout=TIMEOUT_S))
        except Exception as exc:
            self._give_up(exc)
            return None

    def _give_up(self, exc: BaseException) -> None:
        log.warning("the sketch worker failed (%s: %s); sketching in process from now on",
                    type(exc).__name__, exc)
        self.close(wait=False)  # it may hang: not waited for

    def close(self, wait: bool = True) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)


def _start(settings: Settings, parent: int) -> None:
    global _sketcher
    # Ctrl-C and a supervisor's SIGTERM to the group are the consumer's to handle: it ends
    # its batch (which may be waiting on this worker), then closes the pool
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    heap.hold()  # a chunk's arrays reuse the last one's pages (``streamdedup/heap.py``)
    _sketcher = Sketcher(settings)
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)  # orphaned: the consumer is gone


def _sketch(fields: list[dict[str, str]]) -> Packed:
    assert _sketcher is not None
    return pack(_sketcher.sketches(fields, _signed))
