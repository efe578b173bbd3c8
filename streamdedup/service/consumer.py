"""`streamdedup run`: the Kafka consumer, a thin shell around the detector.

Loop: poll a batch -> decode each message (bad ones become dead letters) -> detect ->
add verdicts to the checkpoint -> commit when due (see ``checkpoint.py`` for the order).
SIGINT/SIGTERM only set a flag (``stop.py``): the loop finishes the batch, makes a final
checkpoint, leaves the group, closes the store and returns 0 (1 if that last checkpoint
failed: its messages are judged again by whoever takes the partitions). A failed checkpoint
rewinds and backs off, so a broker that goes away, or a store that cannot write, costs time
but never a verdict.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import FencedInstanceIdError, KafkaError

from streamdedup import __version__, garbage
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Verdict
from streamdedup.detection.shared_detector import detector_for
from streamdedup.errors import MessageError, StoreError, StoreUnavailableError, describe
from streamdedup.service.checkpoint import FLUSH_TIMEOUT_S, Checkpoint, CheckpointFailed
from streamdedup.service.fence import FenceWatch
from streamdedup.service.kafka import (
    BOOTSTRAP_TIMEOUT_MS,
    FATAL_KAFKA_ERRORS,
    MAX_BOOTSTRAP_TIMEOUT_MS,
    BrokerRefused,
    client_options,
    close_producer,
    ensure_topics,
    heartbeat_age_s,
    missing_topics,
)
from streamdedup.service.logs import Throttle
from streamdedup.service.message import decode_message
from streamdedup.service.metrics import HealthServer, Metrics, is_loopback
from streamdedup.service.rebalance import Rebalance
from streamdedup.service.records import (
    Outgoing,
    Source,
    dead_letter_record,
    too_large_letter,
    verdict_record,
)
from streamdedup.service.sketch_worker import CHUNK, FIRST_CHUNK, SketchWorker
from streamdedup.service.stop import Stoppable, StoppedWhileConnecting
from streamdedup.service.store_watch import PING_EVERY_S, RESTART_CHECK_S, StoreWatch
from streamdedup.settings import Settings
from streamdedup.store import Store, open_configured

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STATS_EVERY_S = 15.0
LAG_EVERY_S = 1.0
MOSTLY_DEAD_AT_LEAST = 20  # dead letters between two throughput lines, before it is said
CONSUMER_RETRY_BACKOFF_MS = 10
STUCK_AFTER = 3  # failures in a row after which /readyz answers 503
EXIT_FINAL_COMMIT_FAILED = 1
EXIT_REFUSED = 2


class Service(Stoppable):
    """One consumer process: owns the clients, the store, the detector and the metrics."""

    def __init__(self, settings: Settings, store: Store | None = None, *,
                 handle_signals: bool = False) -> None:
        self.settings = settings
        Stoppable.__init__(self)
        self.fenced = threading.Event()  # set by FenceWatch: another member took our id
        if handle_signals:
            self.install_signal_handlers()
        self.sketcher = Sketcher(settings)
        log.info("starting", extra={"version": __version__, "settings": settings.public(),
                                    "bands": self.sketcher.bands, "rows": self.sketcher.rows})
        self.metrics = Metrics()
        self._server: HealthServer | None = None
        if store is None:  # the probes answer while the store is waited for (they did not:
            self._server = self._serve_health()  # an orchestrator saw a dead process)
            try:
                with self._interruptible():
                    store = self._open_store()
            except BaseException:
                if self._server is not None:
                    self._server.stop()
                raise
        self.store = store
        self.watch = StoreWatch(store)
        self.detector = detector_for(settings, self.store, self.sketcher)
        self.bootstrap_ms = BOOTSTRAP_TIMEOUT_MS  # a client's wait for its first broker
        # Held by the loop except while it is parked in poll() or close(): the only moments
        # kafka-python 3 runs rebalance listeners (on its IO thread), so the store is used
        # by one thread at a time, and the pre-rebalance commit can still be made.
        self.store_in_use = threading.Lock()
        self.processed = 0
        self.duplicates = 0
        self.dead = 0
        self._stats_at = self._lag_at = float("-inf")
        self._dead_said = Throttle(60.0, kinds=1)  # the mostly-dead warning: once a minute
        self._unheard = False  # no heartbeat for longer than the session timeout
        self._dead_lately: dict[str, int] = {}  # reason -> dead letters since the last line
        self._dead_example: dict[str, str] = {}
        self.sketch_worker: SketchWorker | None = None  # started by run()

    def _open_store(self) -> Store:
        """A store server that does not answer yet (Redis still starting, a network blip) is
        waited for, as the broker is; SIGTERM meanwhile ends the process cleanly."""
        delay = 0.5
        while True:
            try:
                store = open_configured(self.settings, self.sketcher.params())
                if self.settings.store_backend == "memory":
                    log.warning("--store-backend memory: the index lives in this process only; "
                                "after a restart every ad is judged against nothing before it "
                                "(offsets already committed are not read again). A dry run; "
                                "use sqlite or redis to keep it")
                return store
            except StoreUnavailableError as exc:
                if self.stopping.is_set():
                    raise StoppedWhileConnecting from exc
                log.warning("store unavailable (%s); retrying in %.1fs", exc, delay)
                self.metrics.beat()  # waiting is alive (/healthz); /readyz says not ready
                self.stopping.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _serve_health(self) -> HealthServer | None:
        s = self.settings
        if not s.metrics_port:
            return None
        server = HealthServer(self.metrics, s.metrics_host, s.metrics_port).start()
        host = s.metrics_host or "every address"  # '' said "served on , reachable..."
        log.info("metrics on http://%s:%d/metrics", s.metrics_host or "0.0.0.0", server.port)
        if not is_loopback(s.metrics_host):
            log.warning("metrics and health are served on %s, reachable from other hosts; "
                        "bind 127.0.0.1 unless that is intended", host)
        return server

    # --- clients
    def _clients(self) -> tuple[KafkaConsumer, KafkaProducer]:
        s = self.settings
        consumer = KafkaConsumer(
            bootstrap_servers=s.bootstrap_servers,
            group_id=s.group_id,
            client_id="streamdedup",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms,
            group_instance_id=s.group_instance_id or None,
            heartbeat_interval_ms=max(100, min(3000, s.session_timeout_ms // 3)),
            max_poll_records=s.poll_max_records,
            max_partition_fetch_bytes=max(1 << 20, s.max_message_bytes + 4096),
            fetch_max_bytes=max(50 << 20, s.max_message_bytes + 4096),
            bootstrap_timeout_ms=self.bootstrap_ms,
            # kafka-python 3 sleeps this long whenever a poll finds no fetch in flight, which
            # happens between one fetch's completion and the next request: with the default
            # 100 ms, about one message in a hundred waited an extra 100 ms (measured).
            retry_backoff_ms=CONSUMER_RETRY_BACKOFF_MS,
            **client_options(s),
        )
        return consumer, self._producer()

    def _producer(self) -> KafkaProducer:
        s = self.settings
        return KafkaProducer(
            bootstrap_servers=s.bootstrap_servers,
            client_id="streamdedup",
            bootstrap_timeout_ms=self.bootstrap_ms,
            acks="all",
            linger_ms=50,  # the checkpoint's flush() sends at once; until then, batch up
            batch_size=256 * 1024,
            retries=5,
            max_block_ms=int(FLUSH_TIMEOUT_S * 1000),
            max_request_size=s.max_output_bytes + 65536,
            **client_options(s),
        )

    def _renew_producer(self, old: KafkaProducer) -> KafkaProducer:
        """The new one first: if it cannot be made (no broker yet), the checkpoint keeps the
        old one, open, and tries again (a closed one failed every later checkpoint)."""
        new = self._producer()
        close_producer(old, 1)
        return new

    # --- processing (no Kafka calls)
    def process_records(self, records: Iterable[Any]) -> list[tuple[TopicPartition, int,
                                                                       Outgoing | None]]:
        """Verdicts or dead letters for a batch, in input order."""
        s = self.settings
        slots: list[tuple[Any, Source, Document | MessageError]] = []
        for rec in records:
            src = Source(rec.topic, rec.partition, rec.offset, rec.timestamp)
            try:
                doc = decode_message(rec.value, s.text_fields, s.max_message_bytes,
                                     s.read_time_field, s.id_field)
                if s.retention and doc.time is None and rec.timestamp is not None \
                        and rec.timestamp >= 0:  # no time of its own: the record's
                    doc = replace(doc, time=int(rec.timestamp))
                item: Document | MessageError = doc
            except MessageError as exc:
                item = exc
            slots.append((rec, src, item))
        docs = [item for _, _, item in slots if isinstance(item, Document)]
        evicted = getattr(self.detector, "evicted", None)
        with self.metrics.stage_seconds.labels("detect").time():
            verdicts = iter(self._detect(docs))
        window = getattr(self.detector, "window", None)
        if window is not None and window.clock_ms is not None and evicted is not None:
            now = self.detector.evicted  # type: ignore[union-attr]
            self.metrics.evicted.labels("documents").inc(now.documents - evicted.documents)
            self.metrics.evicted.labels("sets").inc(now.sets - evicted.sets)
            self.metrics.retention_clock.set(window.clock_ms / 1000)
        out: list[tuple[TopicPartition, int, Outgoing | None]] = []
        for rec, src, item in slots:
            tp = TopicPartition(rec.topic, rec.partition)
            if isinstance(item, MessageError):
                out.append((tp, rec.offset, self._dead_letter(item, src, rec)))
                continue
            result = next(verdicts)
            if isinstance(result, MessageError):
                out.append((tp, rec.offset, self._dead_letter(result, src, rec)))
                continue
            self.processed += 1
            self.metrics.documents.inc()
            self.metrics.candidates.observe(result.candidates)
            if result.duplicate:
                self.duplicates += 1
                self.metrics.duplicates.inc()
            keep = result.duplicate or not s.only_duplicates
            out.append((tp, rec.offset,
                        verdict_record(s.output_topic, result, src, s.max_output_bytes)
                        if keep else None))
        return out

    def _detect(self, docs: list[Document]) -> list[Verdict | MessageError]:
        """Batch detection; if the batch fails, document by document, so that one document
        that trips a bug becomes a dead letter instead of stopping the stream."""
        try:
            return self._judge(docs)
        except StoreError:
            raise
        except Exception:
            log.exception("batch detection failed; retrying document by document")
        results: list[Verdict | MessageError] = []
        for doc in docs:
            try:
                results.append(self.detector.process(doc))
            except StoreError:
                raise
            except Exception as exc:
                log.exception("document %r failed", doc.id)
                results.append(MessageError("internal_error", describe(exc)))
        return results

    def _judge(self, docs: list[Document]) -> list[Verdict | MessageError]:
        """The batch's verdicts; a big batch in chunks whose sketches the worker makes
        while the detector judges the chunk before (``service/sketch_worker.py``)."""
        worker = self.sketch_worker
        if worker is None or len(docs) < 2 * CHUNK:
            return list(self.detector.process_many(docs))
        chunks = [docs[:FIRST_CHUNK], *(docs[i:i + CHUNK]
                                        for i in range(FIRST_CHUNK, len(docs), CHUNK))]
        futures = worker.submit([[d.fields for d in chunk] for chunk in chunks])
        if futures is None:  # the worker is gone
            return list(self.detector.process_many(docs))
        out: list[Verdict | MessageError] = []
        for chunk, future in zip(chunks, futures, strict=True):
            out.extend(self.detector.process_many(chunk, worker.result(future)))
        return out

    def _dead_letter(self, error: MessageError, src: Source, rec: Any) -> Outgoing:
        self.dead += 1
        self._dead_lately[error.reason] = self._dead_lately.get(error.reason, 0) + 1
        self._dead_example.setdefault(error.reason, error.detail)
        self.metrics.dead_letters.labels(error.reason).inc()
        return dead_letter_record(self.settings.dlq_topic, error, src, rec.key, rec.value,
                                  self.settings.max_output_bytes)

    # --- the loop
    def run(self) -> int:
        s = self.settings
        server = self._server
        try:
            if server is None:
                server = self._server = self._serve_health()
            if s.sketch_ahead:
                self.sketch_worker = SketchWorker(s)
                log.info("big batches are sketched ahead in a second process")
            with self._interruptible():
                missing: list[str] = []
                if s.create_topics:
                    self._retry(lambda: ensure_topics(s, self.bootstrap_ms), "topic creation")
                else:
                    missing = self._retry(lambda: missing_topics(s, self.bootstrap_ms),
                                          "topic check")
                clients = None if missing else self._retry(self._clients, "connect")
            if clients is None:
                one = len(missing) == 1
                log.error("%s %s %s not exist and --no-create-topics is given: create %s, or "
                          "leave the flag out to have %s created with --topic-partitions "
                          "partitions", "topic" if one else "topics", ", ".join(missing),
                          "does" if one else "do", "it" if one else "them",
                          "it" if one else "them")
                return EXIT_REFUSED
            return self._loop(*clients)
        except StoppedWhileConnecting:
            log.info("stopped before the broker could be reached; nothing was consumed")
            return 0
        except BrokerRefused as exc:
            log.error("the broker refused: %s; nothing more can be done with these settings", exc)
            return EXIT_REFUSED
        finally:
            if self.sketch_worker is not None:
                self.sketch_worker.close()
            self.store.close()
            if server is not None:
                server.stop()

    def _retry(self, fn: Any, what: str) -> Any:
        delay = 0.5
        while True:
            try:
                return fn()
            except FATAL_KAFKA_ERRORS as exc:
                raise BrokerRefused.of(what, exc, self.settings) from exc
            except KafkaError as exc:
                if self.stopping.is_set():
                    raise StoppedWhileConnecting from exc
                self.bootstrap_ms = min(2 * self.bootstrap_ms, MAX_BOOTSTRAP_TIMEOUT_MS)
                log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
                self.metrics.beat()  # waiting for the broker is alive too
                self.stopping.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _loop(self, consumer: KafkaConsumer, producer: KafkaProducer) -> int:
        s = self.settings
        checkpoint = Checkpoint(self.store, producer, consumer, self.metrics,
                                commit_every=s.commit_every,
                                commit_interval_s=s.commit_interval_s,
                                shrink=lambda o, why: too_large_letter(s.dlq_topic, o, why),
                                renew_producer=self._renew_producer)
        consumer.subscribe([s.input_topic], listener=Rebalance(
            checkpoint, self.metrics.lag, self.store_in_use, lambda: self.fenced.is_set()))

        def refuse_if_fenced() -> None:
            if self.fenced.is_set():  # held verdicts and store writes: the new member's now
                with contextlib.suppress(StoreError):  # the memory store cannot roll back;
                    self.store.rollback()  # it ends with this process anyway
                checkpoint.rewind(store_committed=True)
                raise BrokerRefused.of("in the group", FencedInstanceIdError(
                    f"heartbeat: group_instance_id {s.group_instance_id} fenced"), s)

        garbage.settle()
        backoff = 0.0
        failures = 0  # checkpoints or batches in a row that failed and rewound
        known: set[TopicPartition] = set()  # the assignment already checked against the store
        store_down = False
        pinged = restart_checked = time.monotonic()
        last_log = time.monotonic()
        last_count = 0
        exit_code = 0
        self.store_in_use.acquire()
        watch = FenceWatch(s.group_instance_id) if s.group_instance_id else None
        if watch is not None:
            self.fenced = watch.start()
        try:
            while not self.stopping.is_set():
                self.metrics.beat()
                wait_s = min(0.5, checkpoint.seconds_until_due())  # held verdicts can't wait
                try:
                    self.store_in_use.release()
                    try:
                        batches = consumer.poll(timeout_ms=int(wait_s * 1000),
                                                max_records=s.poll_max_records)
                    finally:
                        self.store_in_use.acquire()
                except FATAL_KAFKA_ERRORS as exc:
                    raise BrokerRefused.of("in the group", exc, s) from exc
                except KafkaError as exc:  # kafka-python 3 raises here while the broker is down
                    log.warning("poll failed, retrying in 0.5s: %s", exc)
                    self.stopping.wait(0.5)
                    batches = {}
                refuse_if_fenced()  # what was fetched is another member's now
                assigned = consumer.assignment()
                self._observe(consumer)
                asked = bool(batches)
                if not batches and time.monotonic() - pinged >= PING_EVERY_S:
                    pinged = time.monotonic()
                    store_down = not self.watch.answers()
                    self._recommit(checkpoint)
                    asked = True
                if store_down and batches:  # back? then checked before anything is judged
                    store_down = not self.watch.answers()
                if asked and not store_down and time.monotonic() - restart_checked \
                        >= RESTART_CHECK_S:
                    restart_checked = time.monotonic()
                    if self.watch.restarted():
                        # A restart unseen by any failure: what is held was judged and taken
                        # seqs from the server before it, so it is judged again, after the
                        # partitions are checked against what the server kept.
                        checkpoint.rewind(unprocessed=[r for tp in sorted(batches)
                                                       for r in batches[tp]])
                        known = set()
                        continue
                new = assigned - known
                rewound: set[TopicPartition] = set()
                if new and not store_down:
                    try:
                        rewound = self.watch.reconcile(consumer, new)
                    except StoreError:  # gone since the last call: checked again once back
                        store_down = True
                    except FATAL_KAFKA_ERRORS as exc:
                        raise BrokerRefused.of("in the group", exc, s) from exc
                    except KafkaError as exc:  # the broker went since the poll (a traceback)
                        log.warning("comparing the group's offsets with the store failed, "
                                    "checked again after the next poll: %s", exc)
                        checkpoint.rewind(unprocessed=[r for tp in sorted(batches)
                                                       for r in batches[tp]])
                        known = set()
                        self.stopping.wait(0.5)
                        continue
                known = assigned if not store_down else set()
                # Not ready while assigned nothing, while the store does not answer, while
                # failures in a row hold the input back (a stuck partition must not look
                # healthy to an orchestrator), or while the group has not heard from it.
                self.metrics.ready = (bool(assigned) and failures < STUCK_AFTER
                                      and not store_down and not self._unheard)
                records = [r for tp in sorted(batches) if tp not in rewound for r in batches[tp]]
                if records:
                    self.metrics.batch_size.observe(len(records))
                    try:
                        processed = self.process_records(records)
                        store_down = False
                    except StoreError as exc:
                        # Rewound and retried until the store answers: the messages wait
                        # in Kafka. Once back, every partition is checked against the store
                        # again (``known`` emptied), in case the server lost writes.
                        checkpoint.rewind(unprocessed=records)
                        failures += 1
                        store_down, known = True, set()
                        self.metrics.ready = False
                        backoff = min(max(backoff * 2, 0.5), MAX_BACKOFF_S)
                        log.error("store failed, rewound; retrying in %.1fs: %s", backoff, exc)
                        self._back_off(backoff, consumer, until_the_store_answers=True)
                        continue
                    for tp, offset, out in processed:
                        checkpoint.add(tp, offset, out)
                if checkpoint.due():
                    refuse_if_fenced()  # nothing published: the verdicts are the new member's
                    try:
                        checkpoint.commit(wait=False)
                        backoff, failures = 0.0, 0
                    except CheckpointFailed as exc:
                        failures += 1
                        backoff = min(max(backoff * 2, 0.5), MAX_BACKOFF_S)
                        log.error("checkpoint failed, rewound; retrying in %.1fs: %s",
                                  backoff, exc)
                        self._back_off(backoff, consumer)
                now = time.monotonic()
                if now - last_log >= s.log_every_s:
                    rate = (self.processed - last_count) / (now - last_log)
                    log.info("throughput", extra={
                        "documents": self.processed, "duplicates": self.duplicates,
                        "dead_letters": self.dead, "docs_per_s": round(rate, 1)})
                    self._warn_if_mostly_dead(now, judged=self.processed - last_count)
                    last_log, last_count = now, self.processed
            exit_code = self._final_commit(checkpoint)
        finally:
            if watch is not None:
                watch.stop()
            self.metrics.ready = False
            self.store_in_use.release()
            consumer.close(autocommit=False)  # leaving the group revokes (the listener runs)
            close_producer(checkpoint.producer)  # settled: flushed, or rewound
        log.info("stopped", extra={"documents": self.processed, "duplicates": self.duplicates,
                                   "dead_letters": self.dead})
        return exit_code

    def _recommit(self, checkpoint: Checkpoint) -> None:
        try:
            checkpoint.recommit()
        except FATAL_KAFKA_ERRORS as exc:
            raise BrokerRefused.of("committing offsets", exc, self.settings) from exc
        except KafkaError as exc:
            log.warning("committing failed offsets again failed; retrying when idle: %s", exc)

    def _final_commit(self, checkpoint: Checkpoint) -> int:
        """The last checkpoint; 0 only if it went through. A failed one has rewound, so the
        work is no longer held and there is nothing left to retry: the next start gets the
        messages again (their stored verdicts answer), and the exit status says so. Then an
        earlier commit still unanswered is waited for (``Checkpoint.settle``); if that fails,
        whether the broker kept it is unknown, so a warning, not the exit status, says so."""
        held = checkpoint.messages
        try:
            checkpoint.commit()
        except CheckpointFailed as exc:
            log.error("final checkpoint failed; %d messages will be redelivered on the next "
                      "start: %s", held, exc)
            return EXIT_FINAL_COMMIT_FAILED
        try:
            checkpoint.settle()
        except KafkaError as exc:
            log.warning("the last offsets committed without waiting were not confirmed; the "
                        "messages since the one before may come again on the next start "
                        "(their stored verdicts answer): %s", describe(exc))
        return 0

    def _warn_if_mostly_dead(self, now: float, judged: int) -> None:
        """Said when most messages since the last line (``judged`` documents and the dead
        letters) became dead letters, at most once a minute: ``run --retention 60d`` on ads
        whose times did not parse sent every one to the dead-letter topic with nothing but
        an INFO count."""
        dead = sum(self._dead_lately.values())
        if dead >= MOSTLY_DEAD_AT_LEAST and dead > judged and self._dead_said.due("dead", now):
            reason = max(self._dead_lately, key=self._dead_lately.__getitem__)
            log.warning("%d of the last %d messages were dead letters, %d of them %s (e.g. %s): "
                        "does what is sent match --text-fields and --time-field?", dead,
                        dead + judged, self._dead_lately[reason], reason,
                        self._dead_example[reason][:200])
        self._dead_lately, self._dead_example = {}, {}

    def _back_off(self, seconds: float, consumer: KafkaConsumer,
                  until_the_store_answers: bool = False) -> None:
        """Wait before trying again, the metrics kept up to date meanwhile; after a store
        failure, no longer than the store takes to answer (a 20-s Redis outage cost 31 s:
        the doubled backoff was waited out)."""
        deadline = time.monotonic() + seconds
        while not self.stopping.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
            self._observe(consumer)
            if time.monotonic() >= deadline or (until_the_store_answers
                                                and self.watch.answers()):
                return

    def _observe(self, consumer: KafkaConsumer) -> None:
        """The lag of each partition held and whether the group hears from this member, at
        most every second (the lag was set only after a checkpoint: 0 through a store outage
        while messages piled up), whether the group's other members share the store (each
        minute), and the store's size every ``STATS_EVERY_S`` (idle too: it kept a mid-burst
        value)."""
        now = time.monotonic()
        if now - self._lag_at < LAG_EVERY_S:
            return
        self._lag_at = now
        try:  # the lag must not stop the judging: ``position`` asks the coordinator when it
            self._unheard = heartbeat_age_s(consumer) > self.settings.session_timeout_ms / 1e3
            for tp in consumer.assignment():  # has no offset, and a partition may go meanwhile
                high = consumer.highwater(tp)
                position = None if high is None else consumer.position(tp, timeout_ms=0)
                if position is not None:
                    self.metrics.lag.labels(str(tp.partition)).set(max(0, high - position))
        except Exception as exc:  # a broker away: a chaos run's consumer exited on it
            log.debug("the lag was not measured: %s", exc)
        try:
            self.watch.check_sharing(consumer, self.settings.input_topic,
                                     consumer.assignment())
        except Exception as exc:  # the broker away: looked at again in a minute
            log.debug("the group's other offsets were not read: %s", exc)
        if now - self._stats_at >= STATS_EVERY_S:  # counting rows is O(store size)
            self._stats_at = now
            try:
                stats = self.store.stats()
            except StoreError:  # gone since the commit: the next batch or ping says so (it
                return          # ended the consumer, 1 test run in 3 with Redis killed)
            self.metrics.store_documents.set(stats["documents"])
            self.metrics.store_bytes.set(stats["bytes"])
