"""Replay a dump through Kafka and the consumer, then measure the verdicts against exact truth.

As a scraper would: each row becomes an announcement JSON (TSV rows keep their columns, and
the row index is the ``id`` when the dump has no id column) produced to the input topic.
The consumer runs as a subprocess (``python -m streamdedup run``) unless one is already
running (``--no-consumer``); the replay reads the output and dead-letter topics until every
produced id is accounted for, then stops what it started and writes DIR/report.json,
report.md, verdicts.jsonl and the plots.

Deterministic: a replay uses fresh topics of one partition, a fresh consumer group and a fresh
store (unless ``--store`` is given), so the consumer sees the rows in file order and two
replays of one dump give byte-identical verdicts.jsonl (the verdicts without their ``source``
provenance, in produced order; its sha256 is in report.json).

The consumer gets the replay's settings through ``STREAMDEDUP_*`` environment variables (never
flags, so secrets stay out of the process list); after the run the replay opens the
consumer's store, which refuses other sketch parameters than those of the ground truth.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamdedup.core.document import Document
from streamdedup.core.verdict import Verdict
from streamdedup.errors import ConfigError, InputError, MessageError, StreamdedupError
from streamdedup.process import ChildProcess, free_port
from streamdedup.replay.config import NOT_FOR_A_REPLAY, ReplayConfig, replay_environment
from streamdedup.replay.dump import read_dump
from streamdedup.service.message import decode_message, encode_message
from streamdedup.settings import Settings, build_settings, env_name

# Columns of the Kijiji TSV that count as an announcement's content even when the settings'
# text fields are fewer: a row with one of them is sent (the consumer dead-letters it if its
# text fields are empty), as a scraper would send it. Text, so not the time: a JSONL row's
# numeric epoch time was a wrong_type row here, where check and backfill read it.
ANNOUNCEMENT_FIELDS = ("title", "description", "location", "link")
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


@dataclass
class ReplayResult:
    report: dict[str, Any]
    paths: dict[str, Path]
    missing: list[str]
    consumer_exit: int | None

    @property
    def ok(self) -> bool:
        return not self.missing and self.consumer_exit in (0, None)


@dataclass(frozen=True)
class _Row:
    doc_id: str
    payload: bytes
    doc: Document | None  # what the consumer will decode; None when it is a dead letter


# --------------------------------------------------------------------------------------------
# the steps


def load_rows(path: Path, fmt: str | None, settings: Settings) -> tuple[list[_Row], int]:
    """Announcements to produce, in file order, and the number of unreadable rows."""
    rows: list[_Row] = []
    unreadable = 0
    seen: set[str] = set()
    for _, item in read_dump(path, fmt, settings.text_fields, optional=ANNOUNCEMENT_FIELDS,
                             max_bytes=settings.max_message_bytes, id_field=settings.id_field):
        if isinstance(item, MessageError):
            unreadable += 1
            continue
        if item.id in seen:
            raise InputError(f"{path}: id {item.id!r} occurs twice; ids must be unique")
        seen.add(item.id)
        payload = encode_message(item)
        try:
            doc: Document | None = decode_message(payload, settings.text_fields,
                                                  settings.max_message_bytes)
        except MessageError:
            doc = None
        rows.append(_Row(item.id, payload, doc))
    if not rows:
        raise InputError(f"{path}: no rows to replay")
    return rows, unreadable


def consumer_env(settings: Settings, base: Mapping[str, str]) -> dict[str, str]:
    """The environment that makes ``streamdedup run`` build exactly ``settings``."""
    env = {**base, **settings.to_env()}
    env.pop(env_name("preset"), None)  # every field is explicit: no preset needed
    return env


def produce(settings: Settings, rows: Sequence[_Row], rate: float, progress: bool
            ) -> dict[str, float]:
    """Send every row to the input topic (key = id); return the send time of each id."""
    from tqdm import tqdm

    from streamdedup.service.kafka import announcement_producer, close_producer

    # a short linger: the replay measures each announcement's latency from its send time
    producer = announcement_producer(settings, "streamdedup-replay", linger_ms=5)
    sent_at: dict[str, float] = {}
    start = time.monotonic()
    try:
        with tqdm(total=len(rows), unit="msg", desc="produce", file=sys.stderr,
                  disable=None if progress else True) as bar:
            for k, row in enumerate(rows):
                if rate > 0:
                    delay = start + k / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                sent_at[row.doc_id] = time.time()
                producer.send(settings.input_topic, key=row.doc_id.encode("utf-8", "surrogatepass"),
                              value=row.payload)
                bar.update(1)
            producer.flush(timeout=60)
    finally:
        close_producer(producer, 10)
    return sent_at


@dataclass
class ReadBack:
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    verdict_at: dict[str, float] = field(default_factory=dict)
    dead: dict[str, str] = field(default_factory=dict)  # id -> reason
    repeated: int = 0  # records for ids already answered (redelivery) or not ours
    missing: list[str] = field(default_factory=list)


class VerdictReader:
    """Reads the output and dead-letter topics from their ends *before* the replay produced,
    so that a long-lived topic's older verdicts are never taken for this replay's."""

    def __init__(self, settings: Settings) -> None:
        from kafka import KafkaConsumer, TopicPartition

        from streamdedup.service.kafka import kafka_security

        self.output_topic = settings.output_topic
        self.reader = KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers, client_id="streamdedup-replay-reader",
            group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
            **kafka_security(settings),
        )
        try:
            tps = [TopicPartition(t, p)
                   for t in dict.fromkeys((settings.output_topic, settings.dlq_topic))
                   for p in sorted(self.reader.partitions_for_topic(t) or {0})]
            self.reader.assign(tps)
            self.reader.seek_to_end(*tps)
            for tp in tps:
                self.reader.position(tp)  # resolve the end offsets now, before producing
        except BaseException:
            self.reader.close()
            raise

    def collect(
        self,
        ids: Sequence[str],
        timeout_s: float,
        progress: bool,
        alive: Callable[[], None] = lambda: None,
    ) -> ReadBack:
        """Verdicts and dead letters until every id has one, or ``timeout_s`` passes without
        news. A verdict's time is its record's timestamp (set when the consumer sent it)."""
        from tqdm import tqdm

        got = ReadBack()
        pending = set(ids)
        last_news = time.monotonic()
        with tqdm(total=len(pending), unit="verdict", desc="verdicts", file=sys.stderr,
                  disable=None if progress else True) as bar:
            while pending and time.monotonic() - last_news < timeout_s:
                alive()
                for tp, records in self.reader.poll(timeout_ms=200).items():
                    for rec in records:
                        is_verdict = tp.topic == self.output_topic
                        doc_id = _record_id(rec.value, rec.key, is_verdict=is_verdict)
                        if doc_id not in pending:
                            got.repeated += 1
                            continue
                        pending.discard(doc_id)
                        bar.update(1)
                        last_news = time.monotonic()
                        body = json.loads(rec.value)
                        if is_verdict:
                            body.pop("source", None)
                            got.verdicts[doc_id] = Verdict.from_dict(body)
                            got.verdict_at[doc_id] = rec.timestamp / 1000.0
                        else:
                            got.dead[doc_id] = body.get("reason", "?")
        got.missing = [i for i in ids if i in pending]
        return got

    def close(self) -> None:
        self.reader.close()


def _record_id(value: bytes, key: bytes | None, *, is_verdict: bool) -> str | None:
    """The replay's id a record answers: a verdict's ``id``; a dead letter's key, which is the
    id the replay sent (the payload's ``id`` was read: "None" for an ad without one, or when
    its text was left out, large or not UTF-8, so the ad counted missing), unless the key was
    cut short."""
    try:
        body = json.loads(value)
        if is_verdict:
            return str(body["id"])
        if key is not None and not body.get("key_truncated"):
            return key.decode("utf-8", "surrogatepass")
        return str(json.loads(body.get("payload_text") or "{}").get("id"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


# --------------------------------------------------------------------------------------------
# the whole replay


def _set_on(name: str) -> bool:
    """Whether the environment turns ``name`` on: `STREAMDEDUP_ONLY_DUPLICATES=false` was
    said "left out" too. A value that does not parse counts (it is left out unread)."""
    raw = os.environ.get(env_name(name), "")
    if not raw.strip():
        return False
    try:
        return bool(getattr(build_settings(env={env_name(name): raw}), name))
    except ConfigError:
        return True


def replay_settings(config: ReplayConfig, bootstrap: str, store: Path,
                    say: Callable[[str], None] = lambda _m: None) -> Settings:
    """The user's settings, with what a replay must fix: its topics, group, store, one
    partition, a verdict for every document, and a metrics port to wait for readiness.

    A setting it cannot use is refused as a flag (exit 2) and left out, said, from the
    environment: one environment serves every command, ``run --retention 60d``'s too."""
    base = build_settings(config.preset, env=replay_environment(os.environ),
                          overrides=config.overrides)
    for name, why in NOT_FOR_A_REPLAY.items():
        if getattr(base, name):  # given as a flag: the environment's is not read
            raise ConfigError(f"{why}: drop --{name.replace('_', '-')}")
        if _set_on(name):
            say(f"{env_name(name)} is left out: {why}")
    if config.store is not None and base.store_backend != "sqlite":
        raise ConfigError(f"--store is a SQLite store's directory; on --store-backend "
                          f"{base.store_backend} the replay's consumer gets a store of its own")
    prefix = config.topic_prefix
    if prefix is None:
        prefix = f"replay-{uuid.uuid4().hex[:8]}." if config.run_consumer else ""
    fixed: dict[str, Any] = {"bootstrap_servers": bootstrap}
    if config.run_consumer:
        fixed.update(
            input_topic=prefix + base.input_topic, output_topic=prefix + base.output_topic,
            dlq_topic=prefix + base.dlq_topic, group_id=prefix + base.group_id,
            store=str(store), topic_partitions=1, create_topics=True,
            metrics_host="127.0.0.1", metrics_port=free_port(),
        )
        if base.store_backend == "redis":  # its own namespace, removed afterwards (the
            # dump went into run's, and the report's truth ignored what that held)
            fixed["redis_namespace"] = prefix + base.redis_namespace[:64 - len(prefix)]
    return base.replace(**fixed)


def replay(config: ReplayConfig, say: Callable[[str], None] = lambda _m: None) -> ReplayResult:
    from streamdedup.core.sketch import Sketcher
    from streamdedup.replay import evaluation as ev
    from streamdedup.replay import report as rp
    from streamdedup.replay import truth as tr
    from streamdedup.service.kafka import ensure_broker, ensure_topics
    from streamdedup.store import read_params
    from streamdedup.store.base import check_params

    started = time.monotonic()
    created = not config.report_dir.exists()
    config.report_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="streamdedup-replay-"))
    consumer_exit: int | None = None
    unreported = False  # verdicts.jsonl replaced, the report not yet written
    namespace: Settings | None = None  # the Redis namespace made for the consumer
    try:
        store = config.store or work / "store"
        bootstrap = config.bootstrap_servers
        settings = replay_settings(config, bootstrap, store, say)
        if config.run_consumer and settings.store_backend == "redis":
            from streamdedup.store.redis.maintenance import holds_keys

            if holds_keys(settings.redis_url, settings.redis_namespace, settings.redis_cluster):
                raise ConfigError(  # (it was removed afterwards, another store with it)
                    f"Redis namespace {settings.redis_namespace!r} already holds keys: the "
                    "replay's consumer writes into a namespace of its own, removed "
                    "afterwards; give another --topic-prefix")
            namespace = settings  # removed at the end, as the temporary SQLite store is
        rows, unreadable = load_rows(config.dump, config.fmt, settings)
        say(f"{len(rows):,} rows to replay ({unreadable} unreadable) to "
            f"{settings.input_topic} on {bootstrap}")
        consumer = ChildProcess("the consumer", [sys.executable, "-m", "streamdedup", "run"],
                                config.report_dir / "consumer.log",
                                env=consumer_env(settings, os.environ))
        try:
            ensure_broker(settings)
            if config.run_consumer:
                ensure_topics(settings)
                consumer.start()
                consumer.wait_ready(
                    f"http://{settings.metrics_host}:{settings.metrics_port}/readyz",
                    READY_TIMEOUT_S)
                say("consumer ready")
            reader = VerdictReader(settings)
            try:
                produce_start = time.monotonic()
                sent_at = produce(settings, rows, config.rate, config.progress)
                produce_s = time.monotonic() - produce_start
                got = reader.collect([r.doc_id for r in rows], config.timeout_s,
                                     config.progress, consumer.check_alive)
            finally:
                reader.close()
        finally:
            consumer_exit = consumer.stop(STOP_TIMEOUT_S)
        sketcher = Sketcher(settings)
        stored = read_params(settings) if config.run_consumer else None
        if stored is not None:  # the consumer signed with the truth's parameters
            check_params(stored, sketcher.params())
        say("ground truth and metrics")
        docs = [r.doc for r in rows if r.doc is not None]
        corpus = tr.Corpus.build(docs, sketcher)
        dump_sha = tr.file_sha256(config.dump)
        truth = tr.ground_truth(corpus, settings.threshold,
                                key=tr.cache_key(dump_sha, sketcher.params(),
                                                 tr.HISTOGRAM_MIN_SIM),
                                cache_dir=config.cache_dir)
        report = ev.evaluate(docs, got.verdicts, truth, settings, dead_letters=len(got.dead),
                             produced_at=sent_at, verdict_at=got.verdict_at,
                             with_band_table=config.band_table)
        order = [r.doc_id for r in rows if r.doc_id in got.verdicts]
        verdicts_path = config.report_dir / "verdicts.jsonl"
        unreported = True
        rp.write_verdicts(verdicts_path, (got.verdicts[i] for i in order))
        report.update({
            "dump": {"path": str(config.dump), "name": config.dump.name, "sha256": dump_sha,
                     "rows": len(rows) + unreadable, "unreadable_rows": unreadable,
                     "expected_dead_letters": sum(r.doc is None for r in rows)},
            "settings": {"preset": config.preset or "default", **sketcher.params(),
                         "max_matches": settings.max_matches,
                         "max_candidates": settings.max_candidates,
                         "store_backend": settings.store_backend},
            "replay": {
                "bootstrap_servers": bootstrap,
                "consumer": "subprocess" if config.run_consumer else "external",
                "consumer_exit": consumer_exit,
                "topics": [settings.input_topic, settings.output_topic, settings.dlq_topic],
                "produce_s": produce_s,
                "sent": len(sent_at),
                "rate_limit": config.rate,
                "repeated_records": got.repeated,
                "dead_letter_reasons": _count(got.dead.values()),
                "missing_ids": got.missing[:50],
                "missing": len(got.missing),
            },
            "verdicts_sha256": hashlib.sha256(verdicts_path.read_bytes()).hexdigest(),
            "elapsed_total_s": time.monotonic() - started,
        })
        paths = rp.write_report(report, config.report_dir)
        paths["verdicts"] = verdicts_path
        return ReplayResult(report, paths, got.missing, consumer_exit)
    except BaseException as exc:
        if unreported:
            with contextlib.suppress(OSError):
                rp.remove_report(config.report_dir)
        if created:  # a failure before anything was written leaves no empty directory
            with contextlib.suppress(OSError):
                if isinstance(exc, KeyboardInterrupt):  # the consumer's log tells nothing
                    (config.report_dir / "consumer.log").unlink(missing_ok=True)
                config.report_dir.rmdir()  # only if empty
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if namespace is not None:
            _remove_namespace(namespace, say)


def _remove_namespace(settings: Settings, say: Callable[[str], None]) -> None:
    from streamdedup.store.redis.client import Keys
    from streamdedup.store.redis.maintenance import remove

    try:
        remove(settings.redis_url, settings.redis_namespace, settings.redis_cluster)
    except StreamdedupError as exc:  # the report stands; the keys are said, not hidden
        say(f"the replay's Redis namespace {settings.redis_namespace!r} could not be removed "
            f"({exc}): its keys match {' '.join(Keys(settings.redis_namespace).patterns())}")


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
