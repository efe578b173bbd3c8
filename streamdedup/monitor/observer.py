"""Reading the detector's topics as an observer: assigned partitions, no consumer group, no
offset commits, so the detector's group never sees it (no rebalance, no lag change).

``start``: ``beginning``, ``latest``, or an ISO 8601 time (the first record at or after it,
by the broker's record timestamps). Records come out as ``(topic, record)`` in poll order;
callers decode them (``decode``) and keep going past a record they cannot read.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from streamdedup.errors import ConfigError
from streamdedup.service.kafka import client_options
from streamdedup.service.logs import Throttle
from streamdedup.service.message import not_json, read_json
from streamdedup.settings import Settings
from streamdedup.terminal import writable

log = logging.getLogger(__name__)
LOOK_EVERY_S = 2.0  # how often missing topics are looked for and the broker is asked
ASK_TIMEOUT_MS = 1000  # a broker that has not answered the ask in this time counts as away
# Records still to read above which the page says "catching up": a live stream leaves some
# unread at any instant (500 verdicts/s, plus the input topic's ads, between two polls).
CATCHING_UP_ABOVE = 2000
# A monitor that has not reached the broker yet gives up an attempt after this (kafka-python's
# default: 30 s), so its page turns from "connecting…" to "not answering" soon; it tries again.
CONNECT_TIMEOUT_MS = 10_000
# Where watching starts unless told: every record the topics still hold (the default of
# ``--from``, and of ``explain``, which looks an id's texts up from the start).
BEGINNING = "beginning"


FROM_AHEAD_S = 86_400  # a --from later than this is no typo of today's time zone


def parse_start(start: str) -> str | int:
    """'beginning', 'latest', or a time as epoch milliseconds; ConfigError otherwise."""
    if start in (BEGINNING, "latest"):
        return start
    try:
        when = datetime.fromisoformat(start.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--from must be 'beginning', 'latest' or an ISO 8601 time "
                          f"(2026-11-30T08:00:00Z), not {start!r}") from None
    if when.tzinfo is None:
        raise ConfigError(f"--from {start!r} needs a time zone (e.g. Z or +01:00)")
    if when.timestamp() < 0:  # Kafka's record times start at 1970
        raise ConfigError(f"--from {start!r} is before 1970-01-01T00:00:00Z")
    if when.timestamp() > time.time() + FROM_AHEAD_S:  # 9999-12-31 showed nothing, silently
        raise ConfigError(f"--from {start!r} is more than a day to come: nothing would be "
                          "shown until then; give 'latest' to watch from now")
    return int(when.timestamp() * 1000)


ANNOUNCEMENTS_EARLIER_MS = 10 * 60_000


class Observer:
    """Follows ``topics`` from ``start``; topics that do not exist yet are picked up when they
    appear (the monitor may start before the detector)."""

    def __init__(self, settings: Settings, topics: Sequence[str], start: str = BEGINNING,
                 client_id: str = "streamdedup-monitor", connect: bool = True) -> None:
        """``connect``: reach the broker now (a KafkaError after 30 s when it does not
        answer: ``tail`` and ``explain`` say so and stop); without it the first ``poll``
        tries, for ``CONNECT_TIMEOUT_MS``, and a later one again, so the monitor's page is up
        while it waits."""
        self.topics = list(dict.fromkeys(topics))
        self.start = parse_start(start)
        # From a time, the ads are read from ANNOUNCEMENTS_EARLIER_MS before it: a verdict
        # written just after it is of an ad sent just before (the detector's lag), whose title
        # was missing.
        self.earlier = {settings.input_topic: ANNOUNCEMENTS_EARLIER_MS}
        self._options = dict(
            bootstrap_servers=settings.bootstrap_servers, group_id=None, client_id=client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            max_partition_fetch_bytes=max(1 << 20, settings.max_output_bytes + 65536),
            **client_options(settings))
        self._consumer: KafkaConsumer | None = KafkaConsumer(**self._options) if connect \
            else None
        self.assigned: set[TopicPartition] = set()
        self._seen_once = False  # the broker's topics were looked at once (the start)
        self._looked = float("-inf")  # monotonic time of the last look for missing topics
        self._asked = float("-inf")  # monotonic time of the last ask (``_ask``)
        self.answered: float | None = None  # wall time of the broker's last answer
        self.away_since: float | None = None  # wall time of the first ask it did not answer
        self.behind: int | None = None  # records on the broker the observer has not read
        self.lag: dict[TopicPartition, int] = {}  # the same per partition, at the last ask

    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            try:
                self._consumer = KafkaConsumer(**self._options,
                                               bootstrap_timeout_ms=CONNECT_TIMEOUT_MS)
            except KafkaError as exc:
                self._away(exc)
                raise
            self._answered()  # (no ask answers while no topic is there to ask about)
        return self._consumer

    @property
    def connected(self) -> bool:
        return self._consumer is not None

    def _assign_new(self) -> None:
        """Assign the partitions that appeared since the last look. From ``latest``, one that
        was not there at the first look is read from its beginning: all it holds came after
        the start (its end, two seconds later, had skipped every verdict the detector wrote
        meanwhile: 0 of 2,000 in a `tail` started before the detector)."""
        found = {TopicPartition(t, p) for t in self.topics
                 for p in (self.consumer.partitions_for_topic(t) or ())}
        late, self._seen_once = self._seen_once, True
        new = found - self.assigned
        if not new:
            return
        self.assigned |= new
        self.consumer.assign(sorted(self.assigned))
        if self.start == "latest" and late:
            self.consumer.seek_to_beginning(*new)
        elif self.start == "latest":
            self.consumer.seek_to_end(*new)
        elif self.start == BEGINNING:
            self.consumer.seek_to_beginning(*new)
        else:
            start = int(self.start)  # (a time: the words were handled above)
            found_at = self.consumer.offsets_for_times(
                {tp: max(0, start - self.earlier.get(tp.topic, 0)) for tp in new})
            for tp in new:
                at = found_at.get(tp)
                if at is None:
                    self.consumer.seek_to_end(tp)
                else:
                    self.consumer.seek(tp, at.offset)

    def poll(self, timeout_ms: int = 500) -> Iterator[tuple[str, Any]]:
        if ({tp.topic for tp in self.assigned} != set(self.topics)  # some not there yet
                and time.monotonic() - self._looked >= LOOK_EVERY_S):
            self._looked = time.monotonic()  # a look is a blocking metadata request
            self._assign_new()
        if not self.assigned:  # no topic there yet: wait as a poll would, then look again
            time.sleep(timeout_ms / 1000)
            return
        try:
            batches = self.consumer.poll(timeout_ms=timeout_ms)
        except KafkaError as exc:
            self._away(exc)
            raise
        if time.monotonic() - self._asked >= LOOK_EVERY_S:  # after the poll: what it took
            self._asked = time.monotonic()                 # is not counted as still to read
            self._ask()
        for tp, records in batches.items():
            for rec in records:
                yield tp.topic, rec

    def _ask(self) -> None:
        """Ask the broker for the assigned partitions' end offsets. A poll returns nothing
        both when the topics are quiet and when the broker is gone (the page said "live"
        through a stopped broker); an answer tells them apart, and end - position is how
        many records are still to read (a monitor started ``--from beginning`` on a long
        topic is catching up, not live)."""
        try:
            ends = self.consumer.end_offsets(sorted(self.assigned), timeout_ms=ASK_TIMEOUT_MS)
            lag = {}
            for tp, end in ends.items():
                at = self.consumer.position(tp, timeout_ms=ASK_TIMEOUT_MS)
                lag[tp] = max(0, end - (end if at is None else at))
        except KafkaError as exc:
            self._away(exc)
            return
        self.lag = lag
        self._answered(sum(lag.values()))

    def _answered(self, behind: int | None = None) -> None:
        if self.away_since is not None:
            log.warning("the broker answers again")
        self.answered, self.away_since, self.behind = time.time(), None, behind

    def _away(self, exc: Exception) -> None:
        if self.away_since is None:
            self.away_since = time.time()
            log.warning("the broker does not answer (%s); what was read until now stays, "
                        "and the broker is asked again", exc)

    def health(self) -> dict[str, Any]:
        """What the page's status says: the topics not there yet, whether the broker answered
        the last ask (None before the first), since when it has not, records to read, and
        whether that is more than a live stream leaves between two asks (``catching_up``)."""
        there = {tp.topic for tp in self.assigned}
        return {"waiting_for": [t for t in self.topics if t not in there]
                if self.connected else [],  # not known before the broker is reached
                "reachable": None if self.answered is None and self.away_since is None
                else self.away_since is None,
                "answered": self.answered, "away_since": self.away_since,
                "behind": self.behind,
                "catching_up": self.behind is not None and self.behind > CATCHING_UP_ABOVE}

    def refresh(self) -> None:
        """Pick up partitions added since (cheap: metadata the client already has)."""
        self._assign_new()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close(autocommit=False)


SKIPPED_SAID_EVERY_S = 60.0
_said = Throttle(SKIPPED_SAID_EVERY_S, kinds=1000)  # per (topic, what)
_skipped: dict[tuple[str, str], int] = {}  # (topic, what) said before -> skipped since


def decode(rec: Any, announcement: bool = False) -> dict[str, Any] | None:
    """A record's JSON object, or None (said) for anything else. ``announcement``: an input
    record, read as the consumer reads it (``message.read_json``), lone surrogates and all:
    its automatic id is the consumer's (``MonitorState.add_announcement`` keeps its text
    writable)."""
    try:  # NaN and Infinity are not JSON (Python reads them; the API could not answer them)
        value = (read_json(rec.value) if announcement else
                 json.loads(rec.value, parse_constant=not_json, parse_float=_finite))
    except (TypeError, ValueError, UnicodeDecodeError, RecursionError):  # 100,000 [s deep
        _skip(rec, "not JSON")
        return None
    if not isinstance(value, dict):
        _skip(rec, "JSON but no object")
        return None
    if not announcement and _SURROGATE.search(rec.value):
        return _without_lone_surrogates(value)
    return value


# "\ud800" is JSON, but a lone surrogate is no character UTF-8 can write: one in a title
# made /api/clusters answer 400 while the ad was listed, and `tail` end in a traceback.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _without_lone_surrogates(value: dict[str, Any]) -> dict[str, Any]:
    """The record with each lone surrogate as '?' (a pair, an emoji, is one character)."""
    text = json.dumps(value, ensure_ascii=False)
    shown = writable(text)
    return value if shown is text else dict(json.loads(shown))


def _skip(rec: Any, what: str) -> None:
    """The first record skipped on a topic is said, then a count once a minute: 2,000 bad
    ads on the input topic (the detector's dead letters) were 2,000 lines at each start of
    `tail` or the monitor, and of an `explain` that answered in 7."""
    key = (rec.topic, what)
    if not _said.due(key, time.monotonic()):
        _skipped[key] = _skipped.get(key, 0) + 1
        return
    where = f"{rec.topic}/{rec.partition}/{rec.offset}"
    if key in _skipped:
        log.warning("skipped %d more records that are %s on %s, the latest at %s",
                    _skipped[key] + 1, what, rec.topic, where)
    else:
        log.warning("skipping a record that is %s at %s (more on %s are counted, said once a "
                    "minute)", what, where, rec.topic)
    _skipped[key] = 0


def _finite(text: str) -> float | str:
    """1e999 is valid JSON, but Python reads it as infinity, which the API cannot write back
    (one such verdict made /api/duplicates answer 400 until 200 newer ones came): kept as its
    text, in a record of the verdict or dead-letter topics (a verdict whose ``jaccard`` that
    makes is a bad record; an ad's is read as the consumer reads it, ``decode``)."""
    value = float(text)
    return value if math.isfinite(value) else text
