"""Administering a Redis store (one namespace), for ``streamdedup store``: stats, a check of
its records, an export, and one document's verdict (``explain --use-store``). Read-only
but for ``remove``, which only a replay calls, on the namespace it made for its own consumer:
the rest runs beside the consumers of a group. Not one snapshot: a group
that is writing meanwhile can make a document appear whose set record arrives in the next
step of its judgement; run ``verify`` on a quiet store (or read its findings as "at that
moment").

Compaction has no Redis equivalent here: the server frees memory as keys go, and rewriting
its append-only file (``BGREWRITEAOF``) is the server operator's call, not one namespace's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from streamdedup.errors import StoreCorruptError, StoreError
from streamdedup.store.base import missing_params, parsed_params
from streamdedup.store.maintenance import format_time, verdict_problems
from streamdedup.store.payload import sorted_hashes
from streamdedup.store.redis.client import Keys, call, connect, safe_url
from streamdedup.store.redis.records import doc_record

_CHUNK = 1_000  # keys per pipelined round trip


def _open(url: str, namespace: str, cluster: bool) -> tuple[Any, Keys]:
    """A client and the namespace's keys; StoreError when no store was ever opened there (a
    mistyped --redis-namespace verified "ok" and exported 0 documents)."""
    r, k = connect(url, cluster, writer=False), Keys(namespace)
    if not call(r.exists, k("meta")):
        raise StoreError(f"no store in Redis namespace {namespace!r} at {safe_url(url)} "
                         "(see --redis-namespace)")
    return r, k


def _docs(r: Any, k: Keys, problems: list[str] | None = None
          ) -> Iterator[tuple[str, int, int, str]]:
    """(id, seq, set id, verdict JSON or "" while being judged) of every document; a damaged
    record is a problem in ``problems`` when given (verify), else StoreCorruptError."""
    for raw_id, raw in call(lambda: list(r.hscan_iter(k("docs"), count=_CHUNK))):
        try:
            doc = doc_record(raw_id.decode("utf-8", "backslashreplace"), raw)
        except StoreCorruptError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        yield doc.doc_id, doc.seq, doc.set_id, doc.verdict


def _number(raw: bytes | None, what: str) -> int:
    """A counter Redis holds as text; damage is named, not a ValueError traceback."""
    try:
        return int(raw or 0)
    except ValueError:
        raise StoreCorruptError(f"{what} is not a number: {(raw or b'')[:40]!r}") from None


def _clock(meta: dict[bytes, bytes]) -> int | None:
    """The retention clock, if the namespace ever ran with retention."""
    raw = meta.get(b"clock")
    return None if raw is None else _number(raw, "the retention clock (meta clock)")


def _params(raw: bytes | None) -> dict[str, Any] | None:
    """The store's parameters from the namespace's ``meta params`` (None: never written)."""
    return None if raw is None else parsed_params(raw, "meta params")


def stats(url: str, namespace: str, cluster: bool = False) -> dict[str, Any]:
    r, k = _open(url, namespace, cluster)
    pipe = r.pipeline(transaction=False)
    pipe.hgetall(k("meta"))
    pipe.hlen(k("docs"))
    pipe.hlen(k("ver"))
    pipe.hgetall(k("counts"))
    pipe.get(k("seq"))
    pipe.hlen(k("pos"))
    pipe.zrange(k("dtime"), 0, 0, withscores=True)
    meta, docs, versions, counts, seq, positions, oldest = call(pipe.execute)
    counted = {key.decode(): _number(v, f"the count of {key.decode()!r}")
               for key, v in counts.items()}
    # A cluster client asks one node unless told: that node's memory was called the whole
    # server's (7.7 of 25 MB over three masters). The masters' (replicas hold copies).
    memory = (call(r.info, "memory", target_nodes=r.PRIMARIES) if cluster
              else call(r.info, "memory"))
    if memory and all(isinstance(v, dict) for v in memory.values()):  # a cluster: per node
        used = sum(int(v.get("used_memory", 0)) for v in memory.values())
    else:
        used = int(memory.get("used_memory", 0))
    params = _params(meta.get(b"params"))
    return {
        "store": f"redis namespace {namespace!r}",
        "store_id": (meta[b"store_id"].decode("utf-8", "backslashreplace")
                     if b"store_id" in meta else None),
        "documents": int(docs),
        "versions": int(versions),
        "distinct_sets": counted.get("sets", 0),
        "bucket_entries": counted.get("bucket_entries", 0),
        # Retention (the single writer's namespace; RETENTION.md "What to watch").
        "clock": format_time(_clock(meta)),
        "oldest_document": format_time(int(oldest[0][1]) if oldest else None),
        "last_seq": _number(seq, "the seq counter"),
        "input_partitions": int(positions),
        "bytes": {"server_used_memory": used,
                  "per_document": round(used / int(docs)) if docs else 0},
        "params": params,
    }


def verify(url: str, namespace: str, cluster: bool = False,
           progress: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Every document's record well-formed and consistent with its verdict and the seq
    counter; every set it names present with its shingles (sorted 64-bit hashes), a
    cluster parent that is a set, and a first document its members agree with."""
    r, k = _open(url, namespace, cluster)
    problems: list[str] = []
    meta = call(r.hgetall, k("meta"))
    for check in (lambda: _params(meta.get(b"params")),  # what stats reads, too
                  lambda: _clock(meta),
                  lambda: [_number(v, f"the count of {c.decode()!r}")
                           for c, v in call(r.hgetall, k("counts")).items()]):
        try:
            check()
        except StoreCorruptError as exc:
            problems.append(str(exc))
    if b"params" not in meta and (held := call(r.hlen, k("docs"))):
        problems.append(missing_params(held))
    try:
        last_seq = _number(call(r.get, k("seq")), "the seq counter")
    except StoreCorruptError as exc:
        problems.append(str(exc))
        last_seq = 1 << 62  # no document is past an unreadable counter
    progress("documents and their verdicts")
    named: set[int] = set()
    oldest: dict[int, int] = {}  # set id -> the seq of its oldest document
    for doc_id, seq, set_id, verdict in _docs(r, k, problems):
        if seq > last_seq:
            problems.append(f"document {doc_id!r}: seq {seq} is past the counter {last_seq}")
        if not verdict:
            continue  # being judged by a member right now (or left so by a crash: redone)
        found, parsed = verdict_problems(doc_id, seq, verdict)
        problems += found
        if parsed is not None and parsed.get("shingles"):
            named.add(set_id)
            oldest[set_id] = min(seq, oldest.get(set_id, seq))
    progress(f"{len(named):,} sets, their shingles and cluster parents")
    ids = sorted(named)
    parents: set[int] = set()
    firsts: dict[int, tuple[int, str]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        pipe = r.pipeline(transaction=False)
        for set_id in chunk:
            pipe.hgetall(k("set", set_id))
            pipe.get(k.shingles(set_id))
        replies = call(pipe.execute)
        for set_id, record, blob in zip(chunk, replies[::2], replies[1::2], strict=True):
            if not record:
                problems.append(f"set {set_id}: named by a document, but not stored")
                continue
            if record.get(b"parent") is not None:
                try:
                    parents.add(_number(record[b"parent"], f"set {set_id}: its cluster parent"))
                except StoreCorruptError as exc:  # damage is a line, not a ValueError
                    problems.append(str(exc))
            if blob is None:
                problems.append(f"set {set_id}: its shingles are missing")
            elif not sorted_hashes(blob):  # Redis keeps hashes, never texts
                problems.append(f"set {set_id}: its shingles are not sorted 64-bit hashes")
            if b"first_seq" in record and b"first_id" in record:
                try:
                    firsts[set_id] = (_number(record[b"first_seq"], f"set {set_id}: its first "
                                              "document's seq"),
                                      record[b"first_id"].decode("utf-8", "backslashreplace"))
                except StoreCorruptError as exc:
                    problems.append(str(exc))
            else:
                problems.append(f"set {set_id}: its record has no first document")
    # A store that ever ran with retention has its clock, and documents that left; in one
    # that never did, none has (as SQLite's verify decides).
    leaving = bool(call(r.hexists, k("meta"), "clock"))
    problems += _first_document_problems(r, k, firsts, oldest, leaving)
    unknown = sorted(parents - named)
    for start in range(0, len(unknown), _CHUNK):
        chunk = unknown[start:start + _CHUNK]
        pipe = r.pipeline(transaction=False)
        for set_id in chunk:
            pipe.exists(k("set", set_id))
        for set_id, exists in zip(chunk, call(pipe.execute), strict=True):
            if not exists:
                problems.append(f"a cluster parent {set_id} is not a stored set")
    return problems


def _first_document_problems(r: Any, k: Keys, firsts: dict[int, tuple[int, str]],
                             oldest: dict[int, int], leaving: bool) -> list[str]:
    """Each set's first document (its seq picks the root that survives a merge, its id names
    the cluster in verdicts) against its documents (``oldest``: the seq of each set's oldest
    current one): none is older, and where no document leaves, the (id, set) pair has a
    verdict with that seq (``ver`` keeps the first verdict of every pair, also after the id
    moved on to another text). As SQLite's ``verify``."""
    problems = [f"set {set_id}: its first document's seq {first_seq} is after its document "
                f"with seq {oldest[set_id]}"
                for set_id, (first_seq, _) in firsts.items() if oldest[set_id] < first_seq]
    if leaving:
        return problems
    ids = sorted(firsts)
    missing: list[int] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        pairs = [f"{firsts[set_id][1]}\0{set_id}" for set_id in chunk]
        for set_id, verdict in zip(chunk, call(r.hmget, k("ver"), pairs), strict=True):
            if verdict is None:
                missing.append(set_id)
                continue
            first_seq, first_id = firsts[set_id]
            seq = _verdict_seq(verdict)
            if seq is not None and seq != first_seq:
                problems.append(f"set {set_id}: its first document {first_id!r} has seq "
                                f"{seq}, the set says {first_seq}")
    if missing:  # claimed, never finished: a crashed member's, redone later, is no damage
        claimed = call(r.hmget, k("claimed"), [f"{firsts[s][1]}\0{s}" for s in missing])
        problems += [f"set {set_id}: its first document {firsts[set_id][1]!r} is not one of "
                     f"its documents"
                     for set_id, seq in zip(missing, claimed, strict=True) if seq is None]
    return problems


def _verdict_seq(verdict: bytes) -> int | None:
    """The seq a verdict records (None: written before verdicts had one, or unreadable,
    which the documents' check reports)."""
    try:
        seq = json.loads(verdict).get("seq")
    except (ValueError, AttributeError):
        return None
    return seq if isinstance(seq, int) else None


def export(url: str, namespace: str, out: TextIO, cluster: bool = False) -> int:
    """Every judged document's verdict, one JSON object per line, in seq order (held in
    memory to sort: Redis keeps them by id)."""
    rows = sorted((seq, doc_id, verdict) for doc_id, seq, _, verdict
                  in _docs(*_open(url, namespace, cluster)) if verdict)
    for _, doc_id, verdict in rows:
        try:  # as SQLite's export refuses a verdict that fails its checksum
            json.loads(verdict)
        except ValueError:
            raise StoreCorruptError(f"the verdict of document {doc_id!r} is not JSON "
                                    "(store verify lists every damaged record)") from None
        out.write(verdict + "\n")
    return len(rows)


def read_params(url: str, namespace: str, cluster: bool = False) -> dict[str, Any] | None:
    """The parameters the namespace's store was built with (None before its first run)."""
    r, k = _open(url, namespace, cluster)
    return _params(call(r.hget, k("meta"), "params"))


def read_verdict(url: str, namespace: str, doc_id: str, cluster: bool = False) -> str | None:
    """A document's verdict JSON; None when it has none (unknown, or still being judged)."""
    r, k = _open(url, namespace, cluster)
    raw = call(r.hget, k("docs"), doc_id)
    return None if raw is None else doc_record(doc_id, raw).verdict or None


def holds_keys(url: str, namespace: str, cluster: bool = False) -> bool:
    """Whether any key of the namespace is there (a replay refuses to use, and then remove,
    a namespace that another store holds)."""
    r, k = connect(url, cluster, writer=False), Keys(namespace)
    return any(call(lambda p=pattern: next(iter(r.scan_iter(match=p, count=_CHUNK)), None))
               is not None for pattern in k.patterns())


def remove(url: str, namespace: str, cluster: bool = False) -> int:
    """Delete every key of a namespace; the number deleted. A replay's consumer on Redis
    writes into a namespace of the replay's own, removed afterwards as its temporary SQLite
    store is (it wrote the whole dump into run's namespace)."""
    r, k = connect(url, cluster, writer=False), Keys(namespace)
    removed = 0
    for pattern in k.patterns():
        keys = call(lambda p=pattern: list(r.scan_iter(match=p, count=_CHUNK)))
        for start in range(0, len(keys), _CHUNK):
            pipe = r.pipeline(transaction=False)
            for key in keys[start:start + _CHUNK]:
                pipe.unlink(key)
            removed += sum(call(pipe.execute))
    return removed
