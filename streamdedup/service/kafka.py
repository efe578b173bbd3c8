"""Kafka client options and topics, shared by the consumer and everything that talks to its
topics (``produce``, the Scrapy pipeline, the replay's producer and reader, the monitor).

Secrets (SASL password, SSL key) come from ``Settings``, i.e. from ``STREAMDEDUP_*`` variables,
and are passed straight to kafka-python; ``Settings.public()`` masks them wherever settings are
logged.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any

from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kafka.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidSessionTimeoutError,
    KafkaError,
    PolicyViolationError,
    SaslAuthenticationFailedError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)

from streamdedup.errors import StreamdedupError, describe
from streamdedup.settings import MIN_OUTPUT_BYTES, Settings, broker_addresses

log = logging.getLogger(__name__)
# How long one client waits for its first broker before it raises and the caller's retry loop
# logs the failure and tries again (kafka-python's own 30 s left a consumer silent that long).
# The consumer doubles it at each failed try, up to the 30 s, so a broker slow to bootstrap
# (TLS and SASL over a long link) is still reached; a signal ends the wait at any point.
BOOTSTRAP_TIMEOUT_MS = 2000
MAX_BOOTSTRAP_TIMEOUT_MS = 30_000
# kafka-python waits up to 30 s between reconnect attempts by default: a broker back after
# an outage went unnoticed that long (the monitor said "not answering" 27 s after it was up).
RECONNECT_BACKOFF_MAX_MS = 5000

# The broker's answer to a setting or a permission: retrying cannot change it, and a process
# that retries forever looks healthy while it judges nothing. These stop it with exit 2. A
# fenced instance id means another consumer joined with the same --group-instance-id: it
# owns the partitions now, and this one would only fight it.
FATAL_KAFKA_ERRORS = (
    InvalidSessionTimeoutError, InvalidReplicationFactorError, InvalidPartitionsError,
    PolicyViolationError, TopicAuthorizationFailedError, GroupAuthorizationFailedError,
    SaslAuthenticationFailedError, FencedInstanceIdError,
)


class BrokerRefused(Exception):
    """The broker refused our settings or credentials; see ``FATAL_KAFKA_ERRORS``."""

    @classmethod
    def of(cls, what: str, exc: Exception, settings: Settings) -> BrokerRefused:
        text = f"{what}: {describe(exc)}"
        if isinstance(exc, FencedInstanceIdError):
            text += (f" (another consumer joined group {settings.group_id!r} with the same "
                     f"--group-instance-id {settings.group_instance_id!r} and took over its "
                     f"partitions: each consumer needs an id of its own)")
        return cls(text)


def client_options(settings: Settings) -> dict[str, Any]:
    """What every long-lived client of ours is given: the security options, and the
    reconnect backoff's cap."""
    return {"reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS, **kafka_security(settings)}


def kafka_security(settings: Settings) -> dict[str, Any]:
    """Client options for SSL and SASL; secrets come from settings (i.e. the environment).
    The protocol and mechanism are taken in any case, and kafka-python reads only upper
    case: ``sasl_ssl`` connected in plain text, without authenticating."""
    opts: dict[str, Any] = {"security_protocol": settings.security_protocol.upper()}
    if settings.sasl_mechanism:
        opts["sasl_mechanism"] = settings.sasl_mechanism.upper()
        opts["sasl_plain_username"] = settings.sasl_username or None
        opts["sasl_plain_password"] = settings.sasl_password or None
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        if getattr(settings, name):
            opts[name] = getattr(settings, name)
    return opts


def announcement_producer(settings: Settings, client_id: str, linger_ms: int = 20,
                          delivery_timeout_ms: int = 120_000, max_block_ms: int = 60_000,
                          ) -> Any:
    """A producer of announcements to the input topic (``produce``, the Scrapy pipeline, a
    replay): every broker in sync acknowledges (``acks="all"``), and a request has room for
    the largest message the consumer accepts plus Kafka's headers and batch overhead.

    Not idempotent: kafka-python's idempotent producer (its default since 3.0) fails every
    send after one the broker refused (a batch over the topic's ``max.message.bytes`` leaves a
    gap in its sequence numbers), so one oversized ad lost the rest of a dump (41 of 101
    refused in the test). What idempotence would add, no duplicate on a retried request,
    the detector gives already: an id and text it has judged get their stored verdict back.
    Without idempotence a retried request could overtake the next one, so one request is in
    flight at a time: announcements reach the topic in the order they were sent (which one
    of two near-duplicates is the original depends on it). Batches of up to 64 KB keep
    ``produce`` as fast as before with it (20,000 generated ads: 4.7 s both, medians of 3);
    with 256 KB a batch over a small topic limit was split by kafka-python and ``flush()``
    failed ("Future not done"), so a batch stays under any usual ``max.message.bytes``.
    A send is settled, acknowledged or failed, within ``delivery_timeout_ms``; ``send()``
    itself blocks at most ``max_block_ms``, while the topic's partitions are not known yet.
    """
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=settings.bootstrap_servers, client_id=client_id,
                         acks="all", linger_ms=linger_ms, enable_idempotence=False,
                         max_in_flight_requests_per_connection=1, batch_size=64 << 10,
                         delivery_timeout_ms=delivery_timeout_ms, max_block_ms=max_block_ms,
                         request_timeout_ms=min(30_000, delivery_timeout_ms - linger_ms),
                         max_request_size=settings.max_message_bytes + (64 << 10),
                         **kafka_security(settings))


def close_producer(producer: Any, timeout_s: float = 2.0) -> None:
    """Closes a producer whose work is settled (flushed, or rewound to be done again): what
    it still holds is worth nothing, and its close failing with the broker away
    (KafkaTimeoutError) put a traceback and exit 1 after SIGTERM, past the "stopped" line
    (it had waited 10 s, after a flush's 30), and over ``produce``'s own message."""
    try:
        producer.close(timeout=timeout_s)
    except Exception as exc:  # kafka-python's errors, or its threads' after a broker died
        log.warning("closing the producer: %s", describe(exc))


def heartbeat_age_s(consumer: Any) -> float:
    """Seconds since this member's last heartbeat went out (kafka-python's own
    ``last-heartbeat-seconds-ago``, 0 before the first or if the metric is gone). Past the
    session timeout the broker is away, or it has given the partitions to other members:
    no rebalance tells a member that while the broker is away. Never raises: it is asked
    before the lag, which must still be measured if this cannot be read."""
    try:
        found = (consumer.metrics() or {}).get("consumer-coordinator-metrics", {})
        age = float(found.get("last-heartbeat-seconds-ago", 0.0))
    except Exception:  # kafka-python calls metrics() an unstable interface
        return 0.0
    return 0.0 if age == float("inf") else age


def ensure_broker(settings: Settings) -> None:
    """One clear line when nothing listens at any bootstrap address, instead of a client
    that retries for 30 s and then raises a timeout from deep inside kafka-python (`produce`,
    `tail` and `explain` waited 30 s to say so; `replay` asked first)."""
    for host, port in broker_addresses(settings.bootstrap_servers):
        with contextlib.suppress(OSError):
            socket.create_connection((host, port), timeout=5.0).close()
            return
    raise StreamdedupError(
        f"no Kafka broker answers at {settings.bootstrap_servers}; pass the address of a "
        "running one with --bootstrap-servers (from a checkout, `scripts/kafka-local start` "
        "starts one, and `python scripts/replay.py` starts and stops its own)"
    )


def ensure_topics(settings: Settings, bootstrap_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
    """Create the input, output and dead-letter topics the broker does not have."""
    admin = _admin(settings, bootstrap_ms)
    try:
        missing = _missing(admin, settings)
        if missing:
            _create(admin, settings, missing)
            log.info("created topics %s", ", ".join(missing))
        if settings.input_topic not in missing:
            _say_fewer_partitions(admin, settings)
        _say_smaller_limits(admin, settings, [t for t in (settings.output_topic,
                                                           settings.dlq_topic)
                                              if t not in missing])
    except TopicAlreadyExistsError:
        pass  # another consumer of the group won the race
    finally:
        admin.close()


def _create(admin: KafkaAdminClient, settings: Settings, topics: list[str]) -> None:
    """Each topic made, or the broker's refusal raised as its error class with its own
    words: kafka-python's message is the whole request and response (1,600 characters for
    three topics), logged at each retry."""
    answer = admin.create_topics({t: {"num_partitions": settings.topic_partitions,
                                      "replication_factor": 1} for t in topics},
                                 raise_errors=False)
    for topic in answer.get("topics", ()):
        error = kafka_errors.for_code(topic.get("error_code", 0))
        if error is kafka_errors.NoError or error is TopicAlreadyExistsError:
            continue  # (another consumer of the group won the race)
        said = topic.get("error_message") or error.description
        raise error(f"topic {topic.get('name')} with --topic-partitions "
                    f"{settings.topic_partitions}: {said}")


def _say_smaller_limits(admin: KafkaAdminClient, settings: Settings, topics: list[str]) -> None:
    """An output topic made with a ``max.message.bytes`` under ``--max-output-bytes`` turns
    every verdict over it into an ``output_too_large`` dead letter, each with an ERROR line
    and ~220 ms of retries (10 of 12 near-identical ads, under 600 bytes): said at start. A
    topic without a limit of its own takes the broker's (1,048,588 by default)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if not topics:
        return
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)
                                        for t in topics])
        limits = {t: int(c["max.message.bytes"]["value"])
                  for t, c in found.get("topic", {}).items() if "max.message.bytes" in c}
    except (KafkaError, AttributeError, KeyError, TypeError, ValueError) as exc:
        log.debug("the output topics' max.message.bytes could not be read: %s", exc)
        return
    for topic in topics:
        limit = limits.get(topic)
        if limit is not None and limit < settings.max_output_bytes:
            log.warning("topic %s takes records of at most %d bytes (its max.message.bytes), "
                        "under --max-output-bytes %d: a record over it becomes an "
                        "output_too_large dead letter; raise the topic's limit, or lower "
                        "--max-output-bytes (at least %d)", topic, limit,
                        settings.max_output_bytes, MIN_OUTPUT_BYTES)


def _say_fewer_partitions(admin: KafkaAdminClient, settings: Settings) -> None:
    """--topic-partitions makes a topic, it does not grow one: a group started on an input
    topic made earlier with one partition had all but one member idle, silently."""
    for meta in admin.describe_topics([settings.input_topic]):
        have = len(meta.get("partitions") or [])
        if 0 < have < settings.topic_partitions:
            one = have == 1
            log.warning("topic %s has %d %s, not the %d of --topic-partitions (which only "
                        "applies to topics it creates): at most %d %s of the group %s work; "
                        "add partitions with kafka-topics.sh --alter", settings.input_topic,
                        have, "partition" if one else "partitions", settings.topic_partitions,
                        have, "consumer" if one else "consumers", "gets" if one else "get")


def missing_topics(settings: Settings, bootstrap_ms: int = BOOTSTRAP_TIMEOUT_MS) -> list[str]:
    """The input, output and dead-letter topics the broker does not have. With
    ``--no-create-topics`` the consumer refuses to start on any: a broker that creates topics
    on first use would otherwise make them with its own defaults when the first verdict is
    sent (one partition, whatever the group needs)."""
    admin = _admin(settings, bootstrap_ms)
    try:
        return _missing(admin, settings)
    finally:
        admin.close()


def _missing(admin: KafkaAdminClient, settings: Settings) -> list[str]:
    existing = set(admin.list_topics())
    wanted = [settings.input_topic, settings.output_topic, settings.dlq_topic]
    return [t for t in dict.fromkeys(wanted) if t not in existing]


def _admin(settings: Settings, bootstrap_ms: int) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers,
                            client_id="streamdedup-admin",
                            bootstrap_timeout_ms=bootstrap_ms, **kafka_security(settings))
