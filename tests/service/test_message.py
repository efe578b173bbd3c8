"""Decoding one message: a Document, or a MessageError whose reason a person can act on."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.document import Document
from streamdedup.errors import MessageError, StreamdedupError
from streamdedup.service.message import (
    REASONS,
    auto_id,
    decode_message,
    document_from_object,
    encode_message,
)

FIELDS = ("title", "description")
LIMIT = 1 << 20


def decode(payload: bytes | None, max_bytes: int = LIMIT) -> Document:
    return decode_message(payload, FIELDS, max_bytes, "timestamp")  # as with --retention


def reason_of(payload: bytes | None, max_bytes: int = LIMIT) -> str:
    with pytest.raises(MessageError) as err:
        decode(payload, max_bytes)
    assert isinstance(err.value, StreamdedupError)
    return err.value.reason


# One payload per reason code: if a reason is added to REASONS, this table must grow.
EXAMPLES = {
    "empty_payload": [None, b""],
    "oversized": [json.dumps({"id": "a", "title": "x" * 200}).encode()],
    "not_utf8": [b'{"id": "a", "title": "caf\xe9"}', b"\xff\xfe{}"],
    "malformed_json": [b'{"id": "a", "title": ', b"{'id': 'a'}", b"NaN-ish", b"[" * 100_000,
                       # Python's, not JSON's, wherever they are (the monitor refused them)
                       b'{"id": "a", "title": "x", "salary": NaN}',
                       b'{"title": "x", "n": [1, -Infinity]}', b'{"id": "a", "title": NaN}'],
    "not_an_object": [b'["a", "b"]', b'"just a string"', b"42", b"null", b"1e999"],
    "wrong_type": [
        b'{"id": 1.5, "title": "x"}',
        b'{"id": 1e999, "title": "x"}',  # a float past a float's range: no id either
        b'{"id": true, "title": "x"}',
        b'{"id": "", "title": "x"}',
        b'{"id": "  ", "title": "x"}',
        b'{"id": ["a"], "title": "x"}',
        b'{"id": "a", "title": 7}',
        b'{"id": "a", "title": "x", "description": {"text": "y"}}',
    ],
    "reserved_id": [b'{"id": "auto-0123456789abcdef0123456789abcdef", "title": "x"}'],
    "id_too_long": [json.dumps({"id": "i" * 4097, "title": "x"}).encode(),
                    # 2,049 characters, 4,098 bytes: the limit is in bytes
                    json.dumps({"id": "è" * 2049, "title": "x"}, ensure_ascii=False).encode(),
                    # an integer too: 300,000 digits made a verdict over max_output_bytes
                    b'{"id": ' + b"9" * 4097 + b', "title": "x"}',
                    b'{"id": ' + b"9" * 300_000 + b', "title": "x"}'],
    "bad_time": [
        b'{"id": "a", "title": "x", "timestamp": "21 ottobre, 17:41"}',
        b'{"id": "a", "title": "x", "timestamp": true}',
        b'{"id": "a", "title": "x", "timestamp": [2024]}',
        b'{"id": "a", "title": "x", "timestamp": 1e300}',
    ],
    "empty_text": [
        b'{"id": "a"}',
        b'{"id": "a", "title": "", "description": " \\n\\t "}',
        b'{"id": "a", "title": null, "location": "Roma"}',
    ],
}


def test_the_examples_cover_every_reason() -> None:
    assert set(EXAMPLES) == set(REASONS)


@pytest.mark.parametrize(
    ("reason", "payload"), [(r, p) for r, ps in EXAMPLES.items() for p in ps]
)
def test_each_reason(reason: str, payload: bytes | None) -> None:
    assert reason_of(payload, max_bytes=100 if reason == "oversized" else LIMIT) == reason


def test_announcement_time_is_read_only_when_asked() -> None:
    day = b'{"id": "a", "title": "x", "timestamp": "2024-03-01T10:00:00Z"}'
    assert decode(day).time == 1_709_287_200_000
    assert decode_message(day, FIELDS, LIMIT).time is None  # retention off: not read
    for raw, ms in ((b'"2024-03-01T11:00:00+01:00"', 1_709_287_200_000),
                    (b'"2024-03-01T10:00:00"', 1_709_287_200_000),  # no zone: UTC
                    (b"1709287200", 1_709_287_200_000),  # epoch seconds
                    (b"1709287200000", 1_709_287_200_000),  # epoch milliseconds
                    (b'"1709287200.5"', 1_709_287_200_500),
                    (b'""', None), (b'" \\t"', None),  # blank: as empty (was bad_time)
                    (b"null", None)):  # missing: the caller falls back
        doc = decode(b'{"id": "a", "title": "x", "timestamp": ' + raw + b"}")
        assert doc.time == ms, raw
    kijiji = b'{"id": "a", "title": "x", "timestamp": "21 ottobre, 17:41"}'
    with pytest.raises(MessageError, match="timestamp: '21 ottobre, 17:41' is neither"):
        decode(kijiji)


def test_message_error_text_carries_reason_and_detail() -> None:
    with pytest.raises(MessageError) as err:
        decode(b'{"id": "a", "title": 7}')
    assert str(err.value).startswith("wrong_type: title must be a string")
    assert err.value.detail.endswith("got JSON number")
    with pytest.raises(MessageError) as err:  # said "got BigFloat", the parser's own type
        decode(b'{"id": "a", "title": 1e999}')
    assert err.value.detail == "title must be a string, got JSON number"


def test_size_limit_is_inclusive() -> None:
    payload = b'{"id": "a", "title": "x"}'
    assert decode(payload, max_bytes=len(payload)).id == "a"
    assert reason_of(payload, max_bytes=len(payload) - 1) == "oversized"


def test_valid_message_keeps_string_fields_and_numbers_as_text() -> None:
    doc = decode(
        json.dumps(
            {"id": "ad-1", "title": "Sviluppatore", "description": "Java", "salary": 30000,
             "remote": True, "location": "Roma", "tags": ["x"], "score": 2.5, "none": None}
        ).encode()
    )
    assert doc == Document("ad-1", {"id": "ad-1", "title": "Sviluppatore",
                                    "description": "Java", "location": "Roma",
                                    "salary": "30000", "score": "2.5"})


def test_a_numeric_epoch_time_survives_as_text_and_reads_back_the_same() -> None:
    """``produce`` and ``replay`` send ``fields`` on; a numeric timestamp dropped there made
    the consumer time each ad by its Kafka record instead (today)."""
    doc = decode(b'{"id": "a", "description": "x", "timestamp": 1700000000123}')
    again = decode(json.dumps(dict(doc.fields)).encode())
    assert doc.fields["timestamp"] == "1700000000123"
    assert doc.time == again.time == 1700000000123


def test_one_text_field_is_enough() -> None:
    assert decode(b'{"id": "a", "description": "solo descrizione"}').fields["description"]


def test_integer_ids_become_strings() -> None:
    assert decode(b'{"id": 42, "title": "x"}').id == "42"
    assert decode(b'{"id": -7, "title": "x"}').id == "-7"
    assert decode(b'{"id": 123456789012345678901234567890, "title": "x"}').id == (
        "123456789012345678901234567890"
    )


def test_missing_id_gets_a_stable_auto_id() -> None:
    a = decode(b'{"title": "Sviluppatore", "link": "https://x/1"}')
    b = decode(b'{ "link" : "https://x/1",\n "title": "Sviluppatore" }')  # same object
    c = decode(b'{"title": "Sviluppatore", "link": "https://x/2"}')  # a repost elsewhere
    assert a.id.startswith("auto-") and len(a.id) == len("auto-") + 32
    assert a.id == b.id != c.id
    # Stable across versions: pinned value of xxh3-128 over the canonical JSON.
    assert auto_id({"title": "x"}) == "auto-" + "3baa78292ea2648c818baf4f476bf91e"
    assert decode(b'{"id": null, "title": "x"}').id == auto_id({"id": None, "title": "x"})


@pytest.mark.parametrize("sub", ["\\ud800", "\\udfff", "x\\ud83dx"])
def test_lone_surrogate_escapes_are_not_utf8(sub: str) -> None:
    # Valid JSON, but the string is not Unicode text: it cannot be shingled or re-encoded.
    assert reason_of(f'{{"id": "a", "title": "ciao {sub} mondo"}}'.encode()) == "not_utf8"
    assert reason_of(f'{{"id": "a{sub}", "title": "ciao"}}'.encode()) == "not_utf8"


def test_escaped_surrogate_pairs_are_fine() -> None:
    assert decode(b'{"id": "a", "title": "\\ud83d\\ude00"}').fields["title"] == "\U0001f600"


def test_nesting_around_the_recursion_limit_never_crashes() -> None:
    # Parsing succeeds up to some depth; the canonical JSON for an auto id needs a little
    # more stack. Every depth around the limit must give a Document or a malformed_json.
    limit = sys.getrecursionlimit()
    outcomes = set()
    for depth in range(limit - 60, limit + 10):
        payload = ('{"title": "x", "a": ' + "[" * depth + "]" * depth + "}").encode()
        try:
            decode(payload)
            outcomes.add("ok")
        except MessageError as exc:
            assert exc.reason == "malformed_json", (depth, exc)
            outcomes.add(exc.reason)
    assert outcomes == {"ok", "malformed_json"}
    with pytest.raises(MessageError) as deep:  # Python's "maximum recursion depth exceeded"
        decode(b"[" * 100_000 + b"]" * 100_000)
    assert deep.value.detail.startswith("arrays or objects nested too deeply to read")


def test_document_from_object_without_json() -> None:
    doc = document_from_object({"id": "a", "title": "t", "n": 1}, ("title",))
    assert doc == Document("a", {"id": "a", "title": "t", "n": "1"})
    with pytest.raises(MessageError) as err:
        document_from_object(["a"], ("title",))
    assert err.value.reason == "not_an_object"


@pytest.mark.parametrize(("payload", "named"), [(b"null", "null"), (b"[1]", "array"),
                                                (b'"x"', "string"), (b"4.5", "number"),
                                                (b"true", "true/false")])
def test_a_message_that_is_no_object_says_what_it_holds_in_json_words(payload: bytes,
                                                                       named: str) -> None:
    with pytest.raises(MessageError) as err:
        decode_message(payload, ("title",), 1 << 20)
    assert err.value.detail == f"got JSON {named}"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_a_document_or_a_known_reason(payload: bytes) -> None:
    try:
        doc = decode(payload)
    except MessageError as exc:
        assert exc.reason in REASONS
    else:
        assert isinstance(doc, Document) and doc.id


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10,
))
def test_arbitrary_json_gives_a_document_or_a_known_reason(obj: object) -> None:
    for value in (obj, {"title": "x", "extra": obj}, {"id": obj, "title": "x"}):
        try:
            decode(json.dumps(value).encode())
        except MessageError as exc:
            assert exc.reason in REASONS


# --- issue 17: valid JSON is not malformed_json; automatic ids cannot be taken over

FIELDS = ("title", "description")


def test_a_utf8_byte_order_mark_is_skipped() -> None:
    doc = decode_message(b'\xef\xbb\xbf{"id": "1", "description": "ciao"}', FIELDS, 1 << 20)
    assert doc.id == "1" and doc.fields["description"] == "ciao"


def test_nan_is_malformed_json_that_says_null_is_json_and_1e999_is_a_number() -> None:
    with pytest.raises(MessageError, match=r"^malformed_json: Infinity is not JSON \(null is\)$"):
        decode(b'{"id": "a", "title": "x", "salary": Infinity}')
    with pytest.raises(MessageError, match=r"got JSON number$"):  # it said "JSON value"
        decode(b"1e999")
    # JSON, a number, kept as its decimal text (it was "inf")
    assert decode(b'{"id": "a", "title": "x", "n": 1e999}').fields["n"] == "1E+999"


def test_a_second_byte_order_mark_is_malformed_json_as_json_loads_says() -> None:
    payload = b'\xef\xbb\xbf\xef\xbb\xbf{"id": "1", "description": "ciao"}'
    with pytest.raises(MessageError) as err:
        decode_message(payload, FIELDS, 1 << 20)
    with pytest.raises(ValueError) as loads:
        json.loads(payload[3:].decode("utf-8"))
    assert err.value.reason == "malformed_json" and err.value.detail == str(loads.value)


def test_integers_past_pythons_digit_limit_are_valid_json() -> None:
    huge = "9" * 5000
    longest = "9" * 4096  # an id's limit, in digits as in bytes
    doc = decode_message(f'{{"id": {longest}, "description": "ciao"}}'.encode(), FIELDS,
                         1 << 20)
    assert doc.id == longest
    doc = decode_message(f'{{"salary": {huge}, "description": "ciao"}}'.encode(), FIELDS,
                         1 << 20)
    assert doc.id.startswith("auto-") and doc.fields["salary"] == huge


def test_an_explicit_automatic_id_must_be_the_messages_own() -> None:
    """Any message could name another's ``auto-`` id and replace its document; now only the
    id the message's own content gives (a re-produced message) is accepted."""
    own = decode_message(b'{"description": "ciao"}', FIELDS, 1 << 20).id
    again = json.dumps({"id": own, "description": "ciao"}).encode()
    assert decode_message(again, FIELDS, 1 << 20).id == own
    thief = json.dumps({"id": own, "description": "un altro annuncio"}).encode()
    with pytest.raises(MessageError) as info:
        decode_message(thief, FIELDS, 1 << 20)
    assert info.value.reason == "reserved_id" and "reserved_id" in REASONS


def test_an_empty_id_is_called_empty() -> None:
    """It said "got str", of a string; then "an empty string" of one space."""
    with pytest.raises(MessageError, match="got an empty string"):
        decode_message(b'{"id": "", "title": "x"}', ("title",), 1 << 20)
    with pytest.raises(MessageError, match="got only spaces"):
        decode_message(b'{"id": " ", "title": "x"}', ("title",), 1 << 20)


_JSON = st.recursive(
    # no NaN or infinity: no message holds one (NaN is refused, 1e999 read as a Decimal)
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                  max_size=3),
    max_leaves=8)


@given(extra=st.dictionaries(st.sampled_from(["salary", "remote", "tags", "link", "id"]), _JSON,
                             max_size=4))
@settings(max_examples=300, deadline=None)
def test_a_document_sent_on_keeps_its_id_and_fields(extra: dict[str, object]) -> None:
    """What `produce` and `replay` send is decoded to the same document. An id-less row with
    a number, a null, a boolean or a list was sent as its string fields under the id its
    whole content gave, and every such row came back a ``reserved_id`` dead letter."""
    obj = {**extra, "title": "Cercasi cameriere", "description": "turni serali"}
    try:
        doc = document_from_object(obj, FIELDS)
    except MessageError:  # an id of the wrong type: nothing to send
        return
    again = decode_message(encode_message(doc), FIELDS, LIMIT)
    assert (again.id, again.fields) == (doc.id, doc.fields)


@pytest.mark.parametrize("extra", [
    '"timestamp": 1700000000, "remote": false, "tags": ["a", {"b": null}]',
    '"salary": ' + "9" * 5000,  # parsed as a Decimal: sent as its digits
    '"link": "https://x/\\ud800"',  # a lone surrogate outside the text: valid JSON, kept
    '"id": null, "salary": 1.5e3',
    '"salary": 1e999, "bonus": -1E+400',  # JSON, infinity to Python: sent as "Infinity"
])
def test_an_id_less_message_is_sent_as_it_came(extra: str) -> None:
    payload = '{"title": "Cercasi", "description": "cameriere", ' + extra + "}"
    doc = decode_message(payload.encode(), FIELDS, LIMIT)
    sent = encode_message(doc)
    assert sent.decode("utf-8")  # valid UTF-8 whatever the row held
    again = decode_message(sent, FIELDS, LIMIT)
    assert again.id == doc.id and again.id.startswith("auto-")
    given_id = decode_message(b'{"id": "7", "title": "Cercasi", "salary": 3}', FIELDS, LIMIT)
    assert json.loads(encode_message(given_id)) == {"id": "7", "title": "Cercasi",
                                                    "salary": "3"}


def test_a_key_read_twice_is_malformed_and_one_nobody_reads_is_not() -> None:
    """``{"id": "a", "id": "b"}`` was judged as "b" (Python keeps the last value) where
    another reader of the topic sees "a"."""
    for twice in (b'{"id": "a", "id": "b", "title": "x"}',
                  b'{"id": "a", "title": "x", "title": "y"}'):
        with pytest.raises(MessageError) as err:
            decode(twice)
        assert err.value.reason == "malformed_json" and "twice" in err.value.detail
    doc = decode(b'{"id": "a", "title": "x", "meta": {"k": 1, "k": 2}, "z": 1, "z": 2}')
    assert doc.id == "a" and doc.fields["z"] == "2"  # a field nobody reads: as before

    # the keys read under other settings: --id-field, the time field, replay's ``also``; and
    # "id" itself, still read under --id-field link (where the link is missing)
    for twice, extra in ((b'{"link": "a", "link": "b", "title": "x"}', {"id_field": "link"}),
                         (b'{"id": "a", "id": "b", "title": "x"}', {"id_field": "link"}),
                         (b'{"title": "x", "ts": "1", "ts": "2"}', {"time_field": "ts"}),
                         (b'{"title": "x", "place": "a", "place": "b"}', {"also": ("place",)})):
        with pytest.raises(MessageError) as err:
            decode_message(twice, ("title",), 10_000, **extra)
        assert err.value.reason == "malformed_json" and "twice" in err.value.detail, extra
        if b'"id"' not in twice:  # not read under the defaults: taken as before
            assert decode_message(twice, ("title",), 10_000).fields["title"] == "x"
