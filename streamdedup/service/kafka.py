"""Kafka client options and topics, shared by the consumer and everything that talks to its
topics (the replay's producer and reader, the monitor to come).

Secrets (SASL password, SSL key) come from ``Settings``, i.e. from ``STREAMDEDUP_*`` variables,
and are passed straight to kafka-python; ``Settings.public()`` masks them wherever settings are
logged.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError

from streamdedup.settings import Settings

log = logging.getLogger(__name__)


def kafka_security(settings: Settings) -> dict[str, Any]:
    """Client options for SSL and SASL; secrets come from settings (i.e. the environment)."""
    opts: dict[str, Any] = {"security_protocol": settings.security_protocol}
    if settings.sasl_mechanism:
        opts["sasl_mechanism"] = settings.sasl_mechanism
        opts["sasl_plain_username"] = settings.sasl_username or None
        opts["sasl_plain_password"] = settings.sasl_password or None
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        if getattr(settings, name):
            opts[name] = getattr(settings, name)
    return opts


def ensure_topics(settings: Settings) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers, client_id="streamdedup-admin",
        **kafka_security(settings),
    )
    try:
        existing = set(admin.list_topics())
        wanted = [settings.input_topic, settings.output_topic, settings.dlq_topic]
        missing = {
            t: {"num_partitions": settings.topic_partitions, "replication_factor": 1}
            for t in dict.fromkeys(wanted) if t not in existing
        }
        if missing:
            try:
                admin.create_topics(missing, raise_errors=True)
                log.info("created topics %s", ", ".join(missing))
            except TopicAlreadyExistsError:
                pass  # another consumer of the group won the race
    finally:
        admin.close()
