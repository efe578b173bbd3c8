"""Decoding one input message (bytes) into a Document, or a MessageError with a reason.

Every way a message can be unusable has a short reason code, because each becomes a dead
letter that a person will read: ``empty_payload``, ``oversized``, ``not_utf8``,
``malformed_json``, ``not_an_object``, ``wrong_type``, ``empty_text``, ``reserved_id``,
``id_too_long`` (over 4,096 bytes: every verdict naming it must fit a Kafka record),
``bad_time`` (with retention on, a time field that is neither ISO 8601 nor epoch seconds).

A message without an ``id`` gets ``auto-`` + the xxh3-128 of its canonical JSON (sorted keys),
so a redelivered message keeps its id while reposts (other link or timestamp) get new ones.
The ``auto-`` prefix is reserved for those: an explicit ``auto-`` id is accepted only if it is
the one the rest of the message gives (a replayed or re-produced message), so no message can
take over another one's document by naming its automatic id.

Valid JSON is accepted as JSON is written: a leading UTF-8 byte order mark is skipped, and an
integer longer than Python's 4,300-digit conversion limit is kept as a ``Decimal`` (an ``id``
of that kind becomes its digits), instead of both being called ``malformed_json``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import xxhash

from streamdedup.core.document import Document
from streamdedup.core.retention import parse_time
from streamdedup.errors import MessageError
from streamdedup.settings import Settings

REASONS = (
    "empty_payload", "oversized", "not_utf8", "malformed_json", "not_an_object",
    "wrong_type", "empty_text", "reserved_id", "id_too_long", "bad_time",
)
MAX_ID_BYTES = 4096  # ids are identifiers (a URL at most): a verdict names up to a dozen
AUTO_PREFIX = "auto-"
_BOM = b"\xef\xbb\xbf"
_INT_DIGITS = 4000  # under sys.get_int_max_str_digits() (4,300), sign included


def _parse_int(text: str) -> int | Decimal:
    return int(text) if len(text) <= _INT_DIGITS else Decimal(text)


class BigFloat(Decimal):
    """A JSON number past a float's range (1e999), which Python reads as infinity and JSON
    cannot write back: kept as a Decimal, as a big integer is, so ``produce`` sends it as its
    text and the consumer computes the same automatic id (sent as ``Infinity``, it was no
    JSON to the consumer). A float still, so never an id."""


def _parse_float(text: str) -> float | Decimal:
    value = float(text)
    return value if math.isfinite(value) else BigFloat(text)


def not_json(name: str) -> Any:
    """NaN, Infinity and -Infinity are Python's, not JSON's: the monitor, ``tail`` and any
    strict reader refuse them, so a message holding one in a field nobody judged was judged
    here and its ad never titled there."""
    raise ValueError(f"{name} is not JSON (null is)")


class _Object(dict[str, Any]):
    """A JSON object that named a key more than once (``twice``): Python keeps the last
    value, other readers the first, so ``{"id": "a", "id": "b"}`` was judged as "b" where
    another reader of the topic saw "a". Only objects with such keys are of this class."""

    __slots__ = ("twice",)
    twice: tuple[str, ...]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    counts = Counter(k for k, _ in pairs)
    odd = _Object(pairs)
    odd.twice = tuple(k for k, n in counts.items() if n > 1)
    return odd


# One decoder for every message: ``json.loads`` with ``parse_int`` builds a decoder and its
# scanner on each call (15 -> 10 us for a generated ad). The pairs hook costs 0.3 us for 1 KB.
_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float,
                            parse_constant=not_json, object_pairs_hook=_object)
_NUMBERS = (int, float, Decimal)  # kept as their decimal text (bool, an int, is not)
# JSON's names for what a message or a text field holds ("got JSON NoneType", "got BigFloat"
# said Python's)
_JSON_TYPES = {list: "array", dict: "object", str: "string", int: "number", float: "number",
               Decimal: "number", BigFloat: "number", bool: "true/false", type(None): "null"}


def auto_id(obj: dict[str, Any]) -> str:
    try:
        canonical = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                               default=str)  # a Decimal: its digits
    except RecursionError:  # parsed just under the recursion limit, deeper than dumps can go
        raise MessageError("malformed_json", "nested too deeply to give it an id") from None
    return AUTO_PREFIX + xxhash.xxh3_128_hexdigest(canonical.encode("utf-8", "surrogatepass"))


def announcement_id(obj: Any, id_field: str = Settings.id_field) -> str | None:
    """The id the consumer gives a parsed announcement, for readers of the input topic (the
    monitor, `tail`, `explain`): its own (read as ``--id-field`` says), or the automatic one
    when it has none (they looked for an ``id`` key, so an id-less feed had no texts and no
    titles). None for a message with no usable id (a dead letter): the consumer's rules."""
    if not isinstance(obj, dict):
        return None
    try:
        return message_id(with_id_field(obj, id_field)[0])
    except MessageError:
        return None


def with_id_field(obj: dict[str, Any], id_field: str) -> tuple[dict[str, Any], str]:
    """The object with its id where ``message_id`` reads it, and the key it came from ('':
    ``id`` itself): ``id_field``'s value where that is there and not blank, else its ``id``
    (what ``produce`` and the Scrapy pipeline send)."""
    if id_field == "id" or not has_value(obj.get(id_field)):
        return obj, ""
    return {**{k: v for k, v in obj.items() if k != "id"}, "id": obj[id_field]}, id_field


def message_id(obj: dict[str, Any]) -> str:
    """A message's document id: its ``id`` (a non-blank string of at most 4,096 bytes, not
    another message's automatic id; or an integer), else the automatic one."""
    raw_id = obj.get("id")
    if raw_id is None:
        return auto_id(obj)
    if isinstance(raw_id, str) and raw_id.strip():
        if raw_id.startswith(AUTO_PREFIX) and raw_id != auto_id(
                {k: v for k, v in obj.items() if k != "id"}):
            raise MessageError("reserved_id", f"ids starting with {AUTO_PREFIX!r} are given to "
                                              f"messages without an id; {raw_id[:80]!r} is not "
                                              f"this message's")
        if len(raw_id) > MAX_ID_BYTES // 4 and len(raw_id.encode("utf-8", "surrogatepass")) \
                > MAX_ID_BYTES:
            raise MessageError("id_too_long", f"the id has more than {MAX_ID_BYTES} bytes")
        return raw_id
    if isinstance(raw_id, int | Decimal) and not isinstance(raw_id, bool | BigFloat):
        digits = str(raw_id)  # past 4,000 digits a Decimal: held to the same limit
        if len(digits) > MAX_ID_BYTES:
            raise MessageError("id_too_long", f"the id has more than {MAX_ID_BYTES} bytes")
        return digits
    got = (("only spaces" if raw_id else "an empty string") if isinstance(raw_id, str)
           else "float" if isinstance(raw_id, BigFloat) else type(raw_id).__name__)
    raise MessageError("wrong_type", f"id must be a non-empty string or an integer, got {got}")


def has_value(value: Any) -> bool:
    """Whether an ``--id-field`` value names an id: not missing, null or blank (a TSV cell's
    only way to say none, which ``produce`` sends on as a blank string)."""
    return value is not None and not (isinstance(value, str) and not value.strip())


def document_from_object(obj: Any, text_fields: tuple[str, ...], time_field: str = "",
                         id_field: str = Settings.id_field, also: tuple[str, ...] = ()) -> Document:
    """Validate a parsed announcement; keeps its string fields, numbers as their decimal text (a
    numeric epoch time must survive ``produce``, ``replay`` and ``backfill --order-by``), and
    with ``time_field`` (given when retention is on) its announcement time, if it has one.
    ``id_field`` (``--id-field``): the key holding the id, read as ``id`` is; where it is
    missing, null or blank, the object's own ``id`` (what ``produce`` and the Scrapy pipeline
    send), else the automatic one. ``also``: fields whose text makes the object no
    ``empty_text`` though they are not read as text, nor checked as such (replay's location
    and link: a number there made a row the consumer judges an unreadable one)."""
    if not isinstance(obj, dict):
        raise MessageError("not_an_object", f"got JSON {_JSON_TYPES.get(type(obj), 'value')}")
    if isinstance(obj, _Object):  # a key given twice matters where it is one we read
        read = {"id", id_field, time_field, *text_fields, *also}
        clash = [key for key in obj.twice if key in read]
        if clash:
            raise MessageError("malformed_json", f"the object gives {clash[0]!r} twice: "
                                                 "readers disagree on which value counts")
    obj, read_from = with_id_field(obj, id_field)
    try:
        doc_id = message_id(obj)
    except MessageError as exc:
        if not read_from:
            raise
        raise MessageError(exc.reason, f"{exc.detail} (read from {read_from!r})") from None
    for name in text_fields:
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise MessageError("wrong_type", f"{name} must be a string, got JSON "
                                             f"{_JSON_TYPES.get(type(value), 'value')}")
    for name, value in (("id", doc_id), *((n, obj.get(n) or "") for n in text_fields)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # JSON allows "\ud800"; it is not text, it cannot be hashed
            raise MessageError("not_utf8", f"{name} holds a lone UTF-16 surrogate") from None
    if not any((obj.get(name) or "").strip() for name in text_fields) and not any(
            isinstance(obj.get(name), str) and obj[name].strip() for name in also):
        raise MessageError("empty_text", f"none of {', '.join((*text_fields, *also))} has "
                                         "text")
    # Strings tested first and alone: a union's isinstance made this 1.9 us a message, not 0.7.
    fields = {k: v if isinstance(v, str) else str(v) for k, v in obj.items()
              if isinstance(v, str) or (isinstance(v, _NUMBERS) and not isinstance(v, bool))}
    source = obj if doc_id.startswith(AUTO_PREFIX) else None  # an id from its content
    raw_time = obj.get(time_field) if time_field else None
    # Empty or blank: no time, as an empty TSV cell ("  " was bad_time, "... got str").
    if raw_time is None or (isinstance(raw_time, str) and not raw_time.strip()):
        return Document(doc_id, fields, None, source)
    try:
        time_ms = parse_time(raw_time)
    except ValueError as exc:
        raise MessageError("bad_time", f"{time_field}: {exc}") from None
    return Document(doc_id, fields, time_ms, source)


def encode_message(doc: Document) -> bytes:
    """The message ``produce`` and ``replay`` send for a document: its id and string fields,
    or, when its id was computed from its content, that content as it came, so that the
    consumer computes the same id. (The fields alone, without a row's numbers as numbers, its
    nulls or lists, hashed to another id: every such row was a ``reserved_id`` dead letter.)"""
    body = doc.source if doc.source is not None else {
        "id": doc.id, **{k: v for k, v in doc.fields.items() if k != "id"}}
    # default=str as in auto_id: a value JSON has no form for (a big integer's Decimal, a
    # Parquet column's bytes) is its text in the id's canonical JSON, so sent as that text
    # the consumer computes the same id.
    return json_bytes(body, str)


def json_bytes(body: Any, default: Callable[[Any], Any],
               separators: tuple[str, str] = (",", ":")) -> bytes:
    """A message's UTF-8 JSON; a lone surrogate ("\\ud800", which JSON allows in a string)
    escaped as JSON writes it, where encoding it raw gave bytes that are no UTF-8 and a
    ``not_utf8`` dead letter. ``default``: what a value JSON has no form for becomes."""
    text = json.dumps(body, ensure_ascii=False, separators=separators, default=default)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=separators, default=default).encode("ascii")


def read_json(payload: bytes | None) -> Any:
    """A message's JSON as the consumer reads it (a byte order mark skipped; big numbers as
    Decimals, NaN refused: ValueError), for readers of the input topic, whose automatic ids
    must be the consumer's (the monitor read 1e999 otherwise, and named the ad another id).
    A record without a value (the consumer's ``empty_payload``) is a ValueError too."""
    if not payload:
        raise ValueError("the message has no value")
    return _DECODER.decode(payload.decode("utf-8").removeprefix("\ufeff"))


def decode_message(
    payload: bytes | None, text_fields: tuple[str, ...], max_bytes: int, time_field: str = "",
    id_field: str = Settings.id_field, also: tuple[str, ...] = (),
) -> Document:
    """One Kafka message value -> Document; raises MessageError with the reason."""
    if not payload:
        raise MessageError("empty_payload", "the message has no value")
    if len(payload) > max_bytes:
        raise MessageError("oversized", f"{len(payload)} bytes > limit {max_bytes}")
    if payload.startswith(_BOM):
        payload = payload[len(_BOM):]
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError("not_utf8", str(exc)) from None
    try:
        if text.startswith("\ufeff"):  # as json.loads says it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        obj = _DECODER.decode(text)
    except ValueError as exc:
        raise MessageError("malformed_json", str(exc)[:200]) from None
    except RecursionError:  # Python's words were "maximum recursion depth exceeded while..."
        raise MessageError("malformed_json", "arrays or objects nested too deeply to read (an "
                           "announcement is one object of text fields)") from None
    return document_from_object(obj, text_fields, time_field, id_field, also)
