"""Output records fit the output topic's limit by construction (issue 17 item 1)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from verdict_strategy import verdicts

from streamdedup.core.verdict import Match, Verdict
from streamdedup.errors import MessageError
from streamdedup.service import records
from streamdedup.service.records import (
    Outgoing,
    Source,
    dead_letter_record,
    too_large_letter,
    verdict_record,
)

SRC = Source("jobs", 0, 42, 1_700_000_000_000)
LIMIT = 1_000_000


def test_a_small_dead_letter_keeps_the_payload_twice() -> None:
    rec = dead_letter_record("dlq", MessageError("malformed_json", "x"), SRC, b"k", b"{oops")
    body = json.loads(rec.value)
    assert body["payload_text"] == "{oops" and base64.b64decode(body["payload_b64"]) == b"{oops"
    assert "payload_truncated" not in body


def test_escapes_that_would_overflow_drop_the_text_copy_first() -> None:
    payload = b"\x00" * 150_000  # 900 KB once JSON-escaped, 200 KB in base64
    rec = dead_letter_record("dlq", MessageError("malformed_json"), SRC, None, payload, LIMIT)
    body = json.loads(rec.value)
    assert len(rec.value) < LIMIT and body["payload_text"] is None
    assert base64.b64decode(body["payload_b64"]) == payload  # still whole


def test_a_payload_over_the_limit_is_cut_with_its_size_and_digest() -> None:
    payload = b"parola " * 300_000
    rec = dead_letter_record("dlq", MessageError("oversized"), SRC, b"k" * 5000, payload, LIMIT)
    body = json.loads(rec.value)
    assert len(rec.value) < LIMIT
    assert body["payload_truncated"] and body["payload_bytes"] == len(payload)
    assert body["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert payload.startswith(base64.b64decode(body["payload_b64"]))
    assert body["key_truncated"] and rec.key is not None and len(rec.key) == 1024


def test_a_verdict_over_the_limit_lists_fewer_ids_and_says_so() -> None:
    long_id = "x" * 4000
    verdict = Verdict(id="a", duplicate=True, duplicate_of="b",
                      matches=tuple(Match(f"{k}{long_id}", 0.9) for k in range(50)),
                      cluster_id="b", candidates=50, exact=False, shingles=10, skipped=0,
                      merged=tuple(f"{k}{long_id}" for k in range(400)))
    rec = verdict_record("out", verdict, SRC, LIMIT)
    body = json.loads(rec.value)
    assert len(rec.value) < LIMIT and body["truncated"] is True
    assert body["matches"][0]["id"] == "0" + long_id and body["duplicate_of"] == "b"
    small = verdict_record("out", Verdict(id="a", duplicate=False, duplicate_of=None,
                                          matches=(), cluster_id="a", candidates=0,
                                          exact=False, shingles=3, skipped=0), SRC, LIMIT)
    assert "truncated" not in json.loads(small.value)


def test_a_refused_record_becomes_a_small_letter_naming_its_source() -> None:
    refused = Outgoing("out", b"id", b"v" * 2_000_000, [("streamdedup-source", b"jobs/0/42")])
    letter = too_large_letter("dlq", refused, "MessageSizeTooLargeError")
    body = json.loads(letter.value)
    assert len(letter.value) < 2000 and body["reason"] == "output_too_large"
    assert letter.topic == "dlq"  # not the input topic its source names
    assert body["source_header"] == "jobs/0/42" and body["refused_bytes"] == 2_000_000
    # ``source`` as every dead letter has it: a reader of the topic need not know this one.
    assert body["source"] == {"topic": "jobs", "partition": 0, "offset": 42,
                              "timestamp_ms": None, "processed_at": body["processed_at"]}
    bare = too_large_letter("dlq", Outgoing("out", None, b"v" * 10), "refused")
    assert json.loads(bare.value)["source"] is None  # no source header: none made up


@settings(max_examples=300, deadline=None)
@given(verdicts(st.text(st.characters(exclude_categories=('Cs',)), max_size=12)),
       st.sampled_from([None, {"note": "x"}, {"source": "theirs"}]))
def test_a_verdict_record_is_its_body_encoded_whole(verdict: Verdict, extra: Any) -> None:
    """The record splices ``source`` into the verdict's JSON; the bytes are those of the
    whole body encoded at once (an ``extra`` named source keeps its place there)."""
    if extra is not None:
        verdict = replace(verdict, extra=extra)
    with patch.object(records, "utc_ms", return_value="2026-12-02T01:00:00.000Z"):
        rec = verdict_record("out", verdict, SRC, LIMIT)
    body = verdict.to_dict()
    body["source"] = {**SRC.as_dict(), "processed_at": "2026-12-02T01:00:00.000Z"}
    assert rec.value == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert rec.key == verdict.id.encode("utf-8", "surrogatepass")
