"""The input stream: announcements built from the dump's rows, in a fixed order for a seed.

Rows in file order (then again as reposts under new ids), near-duplicates of earlier rows
made by the dump-text edits of ``harness/edits.py``, a few exact resends and about 1% bad
messages (every kind of unusable payload, each of which must become a dead letter).
``split`` cuts a stream into the chunks that a run sends between faults.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.edits import mutate
from streamdedup.core.document import Document
from streamdedup.replay.dump import read_dump
from streamdedup.settings import Settings


@dataclass(frozen=True)
class Announcement:
    """One input message; ``kind`` is row, repost, variant, resend or bad."""

    id: str
    value: bytes
    kind: str

    @property
    def key(self) -> bytes:
        return self.id.encode("utf-8")


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The dump's usable rows as announcement fields (without the row-index ``id``)."""
    return [{k: v for k, v in doc.fields.items() if k != "id"}
            for _, doc in read_dump(path, None, Settings.text_fields)
            if isinstance(doc, Document)]


def _bad_payload(k: int, doc_id: str) -> bytes:
    """Every way a message can be unusable, in turn (each must become a dead letter)."""
    kinds: tuple[bytes, ...] = (
        b'{"id": "' + doc_id.encode() + b'", "description": "troncato',
        b"\xff\xfe not utf-8 \xc3\x28",
        b"[1, 2, 3]",
        json.dumps({"id": doc_id, "description": 12}).encode(),
        json.dumps({"id": doc_id, "description": "  \n "}).encode(),
        json.dumps({"id": [doc_id], "description": "Cercasi sviluppatore"}).encode(),
        b"[" * 5000,
        b"",
    )
    return kinds[k % len(kinds)]


def build_stream(rows: Sequence[Mapping[str, str]], n: int, seed: int = 7,
                 variant_share: float = 0.4, repost_edit_share: float = 1.0
                 ) -> list[Announcement]:
    """``n`` announcements in a fixed order: rows in file order (then again as reposts under
    new ids once the file is used up, ``repost_edit_share`` of them edited), near-duplicates
    of earlier rows, a few exact resends (same id, same bytes: an at-least-once producer) and
    about 1% bad messages."""
    rng = random.Random(seed)
    out: list[Announcement] = []
    good: list[tuple[Announcement, dict[str, str]]] = []
    next_row = 0
    while len(out) < n:
        pos = len(out)
        roll = rng.random()
        if roll < 0.01:
            doc_id = f"bad-{pos}"
            out.append(Announcement(doc_id, _bad_payload(pos, doc_id), "bad"))
            continue
        if good and roll < 0.03:
            again = rng.choice(good)[0]
            out.append(Announcement(again.id, again.value, "resend"))
            continue
        if good and roll < 0.03 + variant_share:
            source, fields = rng.choice(good)
            doc_id = f"{source.id}-v{pos}"
            fields = {**fields, "description": mutate(rng, fields.get("description", ""))}
            kind = "variant"
        else:
            row = rows[next_row % len(rows)]
            cycle = next_row // len(rows)
            doc_id = f"k{next_row % len(rows)}" + (f"-c{cycle}" if cycle else "")
            fields = {k: v for k, v in row.items() if isinstance(v, str)}
            if cycle and rng.random() < repost_edit_share:
                fields["description"] = mutate(rng, fields.get("description", ""))
            kind = "repost" if cycle else "row"
            next_row += 1
        item = Announcement(doc_id, json.dumps({"id": doc_id, **fields},
                                               ensure_ascii=False).encode("utf-8"), kind)
        out.append(item)
        good.append((item, fields))
    return out


def split(items: Sequence[Announcement], parts: int) -> list[Sequence[Announcement]]:
    size = max(1, -(-len(items) // max(1, parts)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    while len(chunks) < parts:
        chunks.append([])
    return chunks
