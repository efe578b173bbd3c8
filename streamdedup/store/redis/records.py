"""How the Redis store writes a document and a set into hash values, and reads them back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from streamdedup.errors import StoreCorruptError
from streamdedup.store.base import DocRecord, SetRecord

K = TypeVar("K")
V = TypeVar("V")


def doc_record(doc_id: str, raw: bytes) -> DocRecord:
    """A ``docs`` hash value ("seq set_id[ time]" + "\\n" + verdict) as a record; a damaged
    one is a StoreCorruptError that names the document (it was a ValueError traceback)."""
    try:
        head, _, verdict = raw.decode().partition("\n")
        seq, set_id, *time = head.split()
        return DocRecord(doc_id, int(seq), int(set_id), verdict, int(time[0]) if time else None)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise StoreCorruptError(f"document {doc_id!r}: its record is damaged "
                                f"({str(exc)[:100]})") from None


def set_record(set_id: int, raw: Mapping[bytes, bytes]) -> SetRecord:
    last = raw.get(b"last_time")
    return SetRecord(set_id, int(raw[b"first_seq"]), raw[b"first_id"].decode(),
                     int(raw[b"parent"]), None if last is None else int(last),
                     int(raw.get(b"children", 0)), raw.get(b"evicted", b"0") == b"1")


def last_time_field(time: int | None) -> dict[str, int]:
    return {} if time is None else {"last_time": time}


def held_and_missing(ids: Iterable[K], local: Mapping[K, V]) -> tuple[dict[K, V], list[K]]:
    """What this checkpoint already holds of ``ids``, and the ids to fetch from the server.
    Not ``base.split_held``: a None held here is an answer (a document deleted in this
    checkpoint), not a miss."""
    found: dict[K, V] = {}
    missing: list[K] = []
    for i in ids:
        if i in local:
            found[i] = local[i]
        else:
            missing.append(i)
    return found, missing
