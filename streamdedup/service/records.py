"""What the service writes to Kafka: verdict records and dead-letter records (pure encoding).

A verdict record is the core's verdict JSON plus ``source`` provenance (topic, partition,
offset, processing time). A dead letter carries the reason, the source coordinates and the
original bytes (base64, and as text when they are UTF-8), so nothing a scraper sent is lost.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

from streamdedup.core.verdict import Verdict
from streamdedup.errors import MessageError

REASON_HEADER = "streamdedup-reason"
SOURCE_HEADER = "streamdedup-source"


@dataclass(frozen=True)
class Source:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "timestamp_ms": self.timestamp_ms}

    def header(self) -> bytes:
        return f"{self.topic}/{self.partition}/{self.offset}".encode()


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _now_iso() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def verdict_record(topic: str, verdict: Verdict, source: Source) -> Outgoing:
    body = verdict.to_dict()
    body["source"] = {**source.as_dict(), "processed_at": _now_iso()}
    return Outgoing(
        topic=topic,
        key=verdict.id.encode("utf-8", "surrogatepass"),
        value=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
        headers=[(SOURCE_HEADER, source.header())],
    )


def dead_letter_record(
    topic: str, error: MessageError, source: Source, key: bytes | None, payload: bytes | None
) -> Outgoing:
    payload = payload or b""
    body: dict[str, Any] = {
        "reason": error.reason,
        "detail": error.detail,
        "source": {**source.as_dict(), "processed_at": _now_iso()},
        "key_b64": base64.b64encode(key).decode("ascii") if key is not None else None,
        "payload_b64": base64.b64encode(payload).decode("ascii"),
    }
    try:
        body["payload_text"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        body["payload_text"] = None
    return Outgoing(
        topic=topic,
        key=key,
        value=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
        headers=[(REASON_HEADER, error.reason.encode()), (SOURCE_HEADER, source.header())],
    )
