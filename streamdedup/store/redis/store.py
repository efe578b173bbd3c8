"""The Redis store's single-writer operations: the Store contract on a Redis server.

Layout (keys in ``client.py``; values are explicit bytes or JSON, never pickle):

    meta        hash    params (JSON), store_id, clock (retention), writers ("single" with
                        retention, "shared" for the shared protocol: never both)
    writer      string  the single writer's lock; writer:commit its last commit's tag (lock.py)
    seq         string  arrival numbers: INCR in a group; one writer counts them itself
    docs        hash    doc id -> "seq set_id[ time]" + "\\n" + verdict JSON ("" while being judged)
    ver         hash    "doc id\\0set id" -> the first verdict of that pair
    verof       hash    doc id -> its versions' set ids, space-separated (retention)
    dtime       zset    doc ids by announcement time (retention: oldest go first)
    stime       zset    set ids by their newest document's time (retention)
    pos         hash    "topic\\0partition" -> next offset stored
    set:<id>    hash    first_seq, first_id, parent, last_time, children, evicted, named
                        (named: a group's verdict gave its first document as a cluster id)
    sh:<id>     string  the sorted shingle hashes, big-endian uint64 (SET NX)
    mem:<id>    zset    the set's documents scored by seq
    edges:<id>  hash    other set id -> similarity;  crowded  set: sets over the edge cap
    into:<id>   set     the sets whose edges name crowded set <id> (removed with it;
                        all three in ``edges.py``)
    b:<key>     zset    set ids under a band key, scored by set size, so a probe asks for
                        ZRANGEBYSCORE lo hi and sets of impossible sizes never cross the wire
    bsize       hash    set id -> size, for the sets already in buckets
    bk:<id>     string  the set's band keys, big-endian int64 (to leave its buckets)
    counts      hash    sets, bucket_entries (kept in the same transactions, for stats)
    claimed     hash    "doc id\\0set id" -> seq of a pair claimed, not yet finished (shared)
    joined      hash    seq -> the join's answer (JSON), until that seq is finished (shared)
    left        hash    "doc id\\0set id" -> seq at which the id left that set (shared)

A checkpoint's writes (evictions too) are kept here, read back from here, and sent at
``commit()`` as one MULTI/EXEC; ``rollback()`` forgets them; a batch's probe is one round
trip. These operations assume one writer and one server; a group's consumers use the shared
protocol on the same layout (``shared_store.py``), which also runs on a Redis Cluster.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from streamdedup.errors import ConfigError, StoreCorruptError
from streamdedup.settings import Settings
from streamdedup.store.base import (
    DEFAULT_EDGE_CAP,
    DocRecord,
    Evicted,
    SetRecord,
    Store,
    check_params,
    parsed_params,
)
from streamdedup.store.payload import decode_shingles, encode_shingles
from streamdedup.store.redis.buckets import PROBE, Op, Write, run_per_shard, write_ops
from streamdedup.store.redis.client import Keys, call, connect, ping, run_ids
from streamdedup.store.redis.edges import Edges
from streamdedup.store.redis.lock import WriterLock
from streamdedup.store.redis.reads import Reads
from streamdedup.store.redis.records import (
    doc_record,
    held_and_missing,
    last_time_field,
    set_record,
)
from streamdedup.store.shingle_cache import ShingleCache


class RedisStore(Store):
    """``writer_lock``: take the namespace's writer lock (the product's single-writer mode,
    used with retention), so a second writer is refused instead of corrupting the index."""

    def __init__(self, url: str, namespace: str = Settings.redis_namespace, cluster: bool = False,
                 writer_lock: bool = False) -> None:
        self.namespace = namespace
        self.k = Keys(namespace)
        self.r = connect(url, cluster)
        meta = call(self.r.hgetall, self.k("meta"))
        if b"store_id" not in meta:
            self._refuse_foreign(meta)
            call(self.r.hsetnx, self.k("meta"), "store_id", uuid.uuid4().hex)
        self._store_id = call(self.r.hget, self.k("meta"), "store_id").decode()
        self._runs = run_ids(self.r)
        self._params: dict[str, Any] | None = None  # as read or put: restored if Redis lost it
        self._mode: str | None = None
        self._shingle_cache = ShingleCache()
        self._lock: WriterLock | None = None
        if writer_lock:
            self._claim_mode("single")
            self._lock = WriterLock(self.r, self.k("writer"), namespace)
        self._reads = Reads(self.r, keep=self._lock is not None)
        self._edge_list = Edges(self.k, self._do, self._reads)
        self._reset()

    def _refuse_foreign(self, meta: dict[bytes, bytes]) -> None:
        """A store names itself (``store_id``) before anything else, and old ones recorded
        their parameters first: a ``meta`` with neither, or a ``seq`` without them, is
        another program's, which `check` wrote into without a word."""
        if b"params" in meta:
            return
        foreign = [key for key, there in ((self.k("meta"), bool(meta)),
                                          (self.k("seq"), call(self.r.exists, self.k("seq"))))
                   if there]
        if foreign:
            raise StoreCorruptError(f"Redis namespace {self.namespace!r} holds "
                                    f"{', '.join(foreign)} but is no streamdedup store: "
                                    "another program's keys? Give another --redis-namespace")

    def _claim_mode(self, mode: str) -> None:
        """A namespace is written either by one writer (retention: tombstones, eviction) or
        through the shared protocol, never both: each expects the other's keys absent."""
        self._mode = mode
        call(self.r.hsetnx, self.k("meta"), "writers", mode)
        found = call(self.r.hget, self.k("meta"), "writers").decode()
        if found != mode:
            how = "by one writer with --retention" if found == "single" else \
                "by a consumer group (no --retention)"
            raise ConfigError(f"Redis namespace {self.namespace!r} is written {how}; open it "
                              f"the same way, or use another --redis-namespace")

    def _reset(self) -> None:
        """The checkpoint's writes not yet sent, and what reads must see of them."""
        self._ops: list[Op] = []
        self._docs: dict[str, DocRecord | None] = {}  # None: deleted in this checkpoint
        self._doc_delta = 0  # documents added minus removed in this checkpoint
        self._versions: dict[tuple[str, int], str] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._members_add: dict[int, dict[str, int]] = defaultdict(dict)
        self._members_del: dict[int, set[str]] = defaultdict(set)
        self._sets: dict[int, SetRecord] = {}
        self._shingles: dict[int, np.ndarray] = {}
        self._edge_list.reset()
        self._buckets: dict[int, dict[int, int]] = defaultdict(dict)  # key -> set -> size
        self._keys_added: dict[int, set[int]] = defaultdict(set)  # set -> its keys in those
        self._bucket_writes: list[Write] = []  # sent as one script call a shard
        self._bucketed: set[int] = set()
        self._counted = {"sets": 0, "bucket_entries": 0}
        self._clock: int | None = None  # put in this checkpoint
        self._gone_sets: set[int] = set()  # deleted in this checkpoint
        self._dropped: set[int] = set()  # out of the buckets in this checkpoint
        self._gone_versions: set[tuple[str, int]] = set()
        self._verof: dict[str, list[int]] = {}
        # One writer (the lock): the server's answers kept (reads.py), the seq counted here
        self._reads.reset()
        self._seq: int | None = None

    def _do(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Queue one write of this checkpoint (a redis-py pipeline method and its args)."""
        self._ops.append((method, args, kwargs))

    def ping(self) -> None:
        ping(self.r)
        if self._lock is not None:
            self._lock.check()

    def server_restarted(self) -> str | None:
        """A restart between two asks answers every call after it as if nothing happened (a
        copy restored within a second: 1,000 documents gone, nothing said). One that lost the
        store's identity (no persistence) has it made again with these parameters, which
        another preset could otherwise claim."""
        runs = run_ids(self.r)
        restarted = not runs >= self._runs  # a master joining a cluster lost nothing
        if not restarted and call(self.r.hget, self.k("meta"), "store_id") == \
                self._store_id.encode():
            self._runs = runs
            return None  # (else its keys were deleted, FLUSHDB: as if lost)
        lost = call(self.r.hsetnx, self.k("meta"), "store_id", uuid.uuid4().hex)
        # Read back whoever wrote it: every member of a group must tag its offsets alike.
        store_id = call(self.r.hget, self.k("meta"), "store_id").decode()
        if self._params is not None:  # StoreParamsError: another preset claimed it first
            call(self.r.hsetnx, self.k("meta"), "params", json.dumps(self._params))
            check_params(self.get_params() or {}, self._params)
        if self._mode is not None:
            self._claim_mode(self._mode)
        self._store_id, self._runs = store_id, runs  # only now: the calls above may fail
        what = ("the store's keys were deleted from Redis (it did not restart)" if not restarted
                else "Redis restarted without the store (no persistence?)" if lost
                else "a master of the Redis Cluster restarted, failed over or left"
                if len(runs) > 1 else "Redis restarted")
        return what + (": it starts again empty, with these parameters" if lost else "")

    # --- metadata
    def get_params(self) -> dict[str, Any] | None:
        raw = call(self.r.hget, self.k("meta"), "params")
        if raw is None:
            return None
        params = parsed_params(raw, f"Redis {self.k('meta')} params")
        if self._params is None:
            self._params = params
        return dict(params)

    def put_params(self, params: Mapping[str, Any]) -> None:
        self._params = dict(params)
        call(self.r.hset, self.k("meta"), "params", json.dumps(dict(params)))

    def next_seq(self) -> int:
        if self._lock is None:  # the group's members share the counter
            return int(call(self.r.incr, self.k("seq")))
        if self._seq is None:
            self._seq = int(call(self.r.get, self.k("seq")) or 0)
        self._seq += 1
        return self._seq

    def get_clock(self) -> int | None:
        if self._clock is not None:
            return self._clock
        raw = call(self.r.hget, self.k("meta"), "clock")
        return None if raw is None else int(raw)

    def put_clock(self, clock_ms: int) -> None:
        self._clock = clock_ms
        self._do("hset", self.k("meta"), "clock", clock_ms)

    def store_id(self) -> str:
        return self._store_id

    # --- input positions
    def put_positions(self, positions: Mapping[tuple[str, int], int]) -> None:
        for (topic, partition), offset in positions.items():
            self._positions[(topic, partition)] = offset
            self._do("hset", self.k("pos"), f"{topic}\0{partition}", offset)

    def get_positions(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for field, value in call(self.r.hgetall, self.k("pos")).items():
            topic, _, partition = field.decode().rpartition("\0")
            out[(topic, int(partition))] = int(value)
        out.update(self._positions)
        return out

    # --- documents
    def get_doc(self, doc_id: str) -> DocRecord | None:
        return self._get_docs([doc_id])[doc_id]

    def get_docs(self, doc_ids: Iterable[str]) -> dict[str, DocRecord]:
        found = self._get_docs(list(dict.fromkeys(doc_ids)))
        return {d: r for d, r in found.items() if r is not None}

    def _get_docs(self, doc_ids: Sequence[str]) -> dict[str, DocRecord | None]:
        """Records of many documents: this checkpoint's, then one HMGET for the rest (the
        single writer: one pipeline, with their versions' sets, which it asks next)."""
        out, missing = held_and_missing(doc_ids, self._docs)
        if self._reads.keep:
            raws = self._reads.many([("hget", self.k(h), d) for h in ("docs", "verof")
                                     for d in missing])[:len(missing)]
        else:
            raws = call(self.r.hmget, self.k("docs"), missing) if missing else []
        for doc_id, raw in zip(missing, raws, strict=True):
            out[doc_id] = None if raw is None else doc_record(doc_id, raw)
        return out

    def put_doc(self, doc: DocRecord) -> None:
        old = self.get_doc(doc.doc_id)
        # One writer: an id without a record or versions is new (or was forgotten whole)
        unseen = old is None and self._lock is not None and not self._version_sets(doc.doc_id)
        if old is not None:
            self._leave(old)
        else:
            self._doc_delta += 1
        self._docs[doc.doc_id] = doc
        head = f"{doc.seq} {doc.set_id}" + ("" if doc.time is None else f" {doc.time}")
        self._do("hset", self.k("docs"), doc.doc_id, f"{head}\n{doc.verdict}")
        if doc.time is not None:
            self._do("zadd", self.k("dtime"), {doc.doc_id: doc.time})
            rec = self.get_sets([doc.set_id]).get(doc.set_id)
            if rec is not None and not rec.evicted and (rec.last_time is None
                                                        or rec.last_time < doc.time):
                self._sets[doc.set_id] = replace(rec, last_time=doc.time)
                self._do("hset", self.k("set", doc.set_id), "last_time", doc.time)
                self._do("zadd", self.k("stime"), {doc.set_id: doc.time})
        self._members_del[doc.set_id].discard(doc.doc_id)
        self._members_add[doc.set_id][doc.doc_id] = doc.seq
        self._do("zadd", self.k("mem", doc.set_id), {doc.doc_id: doc.seq})
        if unseen or self.get_version(doc.doc_id, doc.set_id) is None:
            self._versions[(doc.doc_id, doc.set_id)] = doc.verdict
            self._gone_versions.discard((doc.doc_id, doc.set_id))
            self._do("hsetnx", self.k("ver"), f"{doc.doc_id}\0{doc.set_id}", doc.verdict)
            if doc.time is not None or self._lock is not None:  # retention: a version
                # must be found to be removed; the single writer's list is every version
                sets = [*self._version_sets(doc.doc_id), doc.set_id]
                self._verof[doc.doc_id] = sets
                self._do("hset", self.k("verof"), doc.doc_id, " ".join(map(str, sets)))

    def _leave(self, old: DocRecord) -> None:
        self._members_add[old.set_id].pop(old.doc_id, None)
        self._members_del[old.set_id].add(old.doc_id)
        self._do("zrem", self.k("mem", old.set_id), old.doc_id)

    def delete_doc(self, doc_id: str) -> None:
        old = self.get_doc(doc_id)
        if old is None:
            return
        self._leave(old)
        self._doc_delta -= 1
        self._docs[doc_id] = None
        self._do("hdel", self.k("docs"), doc_id)

    def _version_sets(self, doc_id: str) -> list[int]:
        if doc_id in self._verof:
            return self._verof[doc_id]
        raw = self._reads.one("hget", self.k("verof"), doc_id)
        return [] if raw is None else [int(x) for x in raw.split()]

    def get_version(self, doc_id: str, set_id: int) -> str | None:
        if (doc_id, set_id) in self._gone_versions:
            return None
        if (doc_id, set_id) in self._versions:
            return self._versions[(doc_id, set_id)]
        raw = self._reads.one("hget", self.k("ver"), f"{doc_id}\0{set_id}")
        return None if raw is None else raw.decode()

    def members(self, set_id: int, limit: int, since: int | None = None
                ) -> list[tuple[int, str]]:
        removed = self._members_del.get(set_id, set())
        # With ``since``, every member is read: expired ones are few (eviction keeps up).
        stop = -1 if since is not None else limit + len(removed) - 1
        stored = self._reads.one("zrange", self.k("mem", set_id), 0, stop, False, True)
        found = {m.decode(): int(score) for m, score in stored}
        for doc_id in removed:
            found.pop(doc_id, None)
        found.update(self._members_add.get(set_id, {}))
        ordered = sorted((seq, doc_id) for doc_id, seq in found.items())
        if since is None:
            return ordered[:limit]
        out: list[tuple[int, str]] = []
        for start in range(0, len(ordered), 2 * limit):  # one HMGET per page
            page = ordered[start:start + 2 * limit]
            docs = self._get_docs([doc_id for _, doc_id in page])
            out += [(seq, doc_id) for seq, doc_id in page if (doc := docs[doc_id]) is not None
                    and (doc.time is None or doc.time >= since)]
            if len(out) >= limit:
                break
        return out[:limit]

    # --- shingle sets and clusters
    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]:
        out, missing = held_and_missing(set_ids, self._sets)
        missing = [s for s in missing if s not in self._gone_sets]
        if missing:
            raws = self._reads.many([("hgetall", self.k("set", s)) for s in missing])
            # A set not there yet is about to be added and bucketed: the writer asks next
            self._reads.ahead(("hexists", self.k("bsize"), s)
                              for s, raw in zip(missing, raws, strict=True) if not raw)
            for set_id, raw in zip(missing, raws, strict=True):
                if raw:
                    out[set_id] = self._sets[set_id] = set_record(set_id, raw)
        return out

    def add_set(self, record: SetRecord, shingles: np.ndarray, text: str | None = None
                ) -> None:
        old = self.get_sets([record.set_id]).get(record.set_id)
        if old is not None and not old.evicted:
            return
        self._gone_sets.discard(record.set_id)
        self._shingles[record.set_id] = shingles.copy()
        self._do("set", self.k.shingles(record.set_id), encode_shingles(shingles))
        if record.last_time is not None:
            self._do("zadd", self.k("stime"), {record.set_id: record.last_time})
        if old is not None:  # a tombstone comes back: its cluster as it was
            self._sets[record.set_id] = replace(old, evicted=False, last_time=record.last_time)
            self._do("hset", self.k("set", record.set_id), mapping={
                "evicted": 0, **last_time_field(record.last_time)})
            return
        self._sets[record.set_id] = record
        self._count("sets", 1)
        self._do("hset", self.k("set", record.set_id), mapping={
            "first_seq": record.first_seq, "first_id": record.first_id,
            "parent": record.parent, **last_time_field(record.last_time)})

    def _write_parent(self, set_id: int, parent: int) -> None:
        self._sets[set_id] = replace(self._sets[set_id], parent=parent)
        self._do("hset", self.k("set", set_id), "parent", parent)

    def _add_children(self, set_id: int, delta: int) -> int:
        rec = self.get_sets([set_id]).get(set_id)
        if rec is None:
            return 0
        self._sets[set_id] = replace(rec, children=rec.children + delta)
        self._do("hincrby", self.k("set", set_id), "children", delta)
        return rec.children + delta

    # --- retention
    def evict(self, cutoff_ms: int, limit: int) -> Evicted:
        """What left the window, from the server and from this checkpoint's own writes (the
        server has not seen those: ads that came and left within one batch stayed, and the
        same dump clustered apart from SQLite's)."""
        docs = [raw.decode() for raw in call(
            self.r.zrangebyscore, self.k("dtime"), "-inf", f"({cutoff_ms}", 0, limit)]
        docs += [d for _, d in sorted((doc.time, doc.doc_id) for doc in self._docs.values()
                                      if doc is not None and doc.time is not None
                                      and doc.time < cutoff_ms)[:limit]]
        gone, docs = 0, list(dict.fromkeys(docs))
        self._get_docs(docs)  # one HMGET, kept for the loop (one writer)
        for doc_id in docs:
            doc = self.get_doc(doc_id)
            if doc is not None and doc.time is not None and doc.time < cutoff_ms:
                self.forget_doc(doc.doc_id)
                gone += 1
        sets = [int(raw) for raw in call(
            self.r.zrangebyscore, self.k("stime"), "-inf", f"({cutoff_ms}", 0, limit)]
        sets += [i for _, i in sorted((rec.last_time, rec.set_id) for rec in self._sets.values()
                                      if not rec.evicted and rec.last_time is not None
                                      and rec.last_time < cutoff_ms)[:limit]]
        gone_sets = 0
        recs = self.get_sets(sets)  # one pipeline; kept for the checkpoint
        leaving = [s for s in dict.fromkeys(sets) if (rec := recs.get(s)) is not None
                   and not rec.evicted and rec.last_time is not None
                   and rec.last_time < cutoff_ms]
        self._ask_ahead(leaving)
        for set_id in leaving:
            rec = self.get_sets([set_id]).get(set_id)
            if rec is not None and not rec.evicted and rec.last_time is not None \
                    and rec.last_time < cutoff_ms:
                self.evict_set(set_id)
                gone_sets += 1
        return Evicted(gone, gone_sets)

    def _ask_ahead(self, set_ids: Sequence[int]) -> None:
        """What dropping these sets reads (members, band keys, edges; then the members'
        records) in two round trips, where it took four a set."""
        self._reads.ahead(read for s in set_ids for read in (
            ("zrange", self.k("mem", s), 0, -1), ("get", self.k("bk", s)),
            ("sismember", self.k("crowded"), s), ("hgetall", self.k("edges", s)),
            ("smembers", self.k("into", s))))
        if self._reads.keep:
            members = [self._reads.one("zrange", self.k("mem", s), 0, -1) for s in set_ids]
            self._get_docs(list(dict.fromkeys(m.decode() for found in members for m in found)))

    def forget_doc(self, doc_id: str) -> None:
        old = self.get_doc(doc_id)
        self.delete_doc(doc_id)
        self._do("zrem", self.k("dtime"), doc_id)
        sets = self._version_sets(doc_id)
        if old is not None and old.set_id not in sets:
            sets = [*sets, old.set_id]
        for set_id in sets:
            self._versions.pop((doc_id, set_id), None)
            self._gone_versions.add((doc_id, set_id))
            self._do("hdel", self.k("ver"), f"{doc_id}\0{set_id}")
        self._verof[doc_id] = []
        self._do("hdel", self.k("verof"), doc_id)

    def _drop_set(self, set_id: int) -> None:
        stored = self._reads.one("zrange", self.k("mem", set_id), 0, -1)
        for doc_id in {m.decode() for m in stored} | set(self._members_add.get(set_id, {})):
            doc = self.get_doc(doc_id)
            if doc is not None and doc.set_id == set_id:
                self.forget_doc(doc_id)
        self._members_add.pop(set_id, None)
        self._do("delete", self.k("mem", set_id))
        self._shingles.pop(set_id, None)
        self._shingle_cache.drop(set_id)
        self._do("delete", self.k.shingles(set_id))
        raw_keys = self._reads.one("get", self.k("bk", set_id))
        keys = [] if raw_keys is None else np.frombuffer(raw_keys, ">i8").tolist()
        keys = list(dict.fromkeys([*keys, *self._keys_added.pop(set_id, ())]))
        for key in keys:
            self._buckets.get(key, {}).pop(set_id, None)
            self._bucket_writes.append((key, set_id, None))
        if keys or set_id in self._bucketed:
            self._count("bucket_entries", -len(keys))
        self._bucketed.discard(set_id)
        self._dropped.add(set_id)
        self._do("hdel", self.k("bsize"), set_id)
        self._do("delete", self.k("bk", set_id))
        self._edge_list.drop(set_id)
        self._do("zrem", self.k("stime"), set_id)

    def _mark_evicted(self, set_id: int) -> None:
        self._sets[set_id] = replace(self._sets[set_id], evicted=True, last_time=None)
        self._do("hset", self.k("set", set_id), "evicted", 1)
        self._do("hdel", self.k("set", set_id), "last_time")

    def _delete_set(self, set_id: int) -> None:
        self._sets.pop(set_id, None)
        self._gone_sets.add(set_id)
        self._count("sets", -1)
        self._do("delete", self.k("set", set_id))

    def get_shingles(self, set_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Pipelined GETs (an MGET cannot span a cluster's slots). A set id is the
        fingerprint of its shingles, so a blob never changes: fetched ones are kept (128 MB,
        ``store/shingle_cache.py``), and a hot set is read from Redis once per process."""
        out, missing = held_and_missing(set_ids, self._shingles)
        held, missing = (cache := self._shingle_cache).split(missing)
        out.update(held)
        if missing:
            pipe = self.r.pipeline(transaction=False)
            for s in missing:
                pipe.get(self.k.shingles(s))
            for s, blob in zip(missing, call(pipe.execute), strict=True):
                if blob is not None:
                    out[s] = cache.put(s, decode_shingles(blob))
        return out

    def add_edges(self, set_id: int, edges: Sequence[tuple[int, float]],
                  cap: int = DEFAULT_EDGE_CAP) -> None:
        if edges:
            self._edge_list.add(set_id, edges, cap)

    def neighbours(self, set_id: int) -> list[tuple[int, float]] | None:
        return self._edge_list.neighbours(set_id)

    # --- buckets
    def probe(self, keys: Sequence[int], sizes: tuple[int, int] | None = None
              ) -> dict[int, int]:
        return self.probe_many([keys], [sizes or (0, 1 << 62)])[0]

    def probe_many(self, queries: Sequence[Sequence[int]],
                   sizes: Sequence[tuple[int, int]]) -> list[dict[int, int]]:
        """All queries in one pipelined round trip (per node on a cluster): one Lua call per
        bucket shard (``buckets.py``). Sets outside each query's sizes stay on the server."""
        plan = []
        per_shard: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for keys, (lo, hi) in zip(queries, sizes, strict=True):
            distinct = list(dict.fromkeys(int(k) for k in keys))
            plan.append((distinct, lo, hi))
            for key in distinct:
                per_shard[self.k.shard(key)].append((key, lo, hi))
        found = run_per_shard(self.r, self.k, PROBE, per_shard)
        out = []
        for distinct, lo, hi in plan:
            hits: dict[int, int] = defaultdict(int)
            for key in distinct:
                sets = {int(m) for m in found[(key, lo, hi)]} - self._dropped
                sets.update(s for s, size in self._buckets.get(key, {}).items()
                            if lo <= size <= hi)
                for set_id in sets:
                    hits[set_id] += 1
            out.append(dict(hits))
        return out

    def add_to_buckets(self, keys: Sequence[int], set_id: int, size: int) -> None:
        distinct = list(dict.fromkeys(int(k) for k in keys))
        new = set_id in self._dropped or (set_id not in self._bucketed and not self._reads.one(
            "hexists", self.k("bsize"), set_id))
        self._dropped.discard(set_id)
        self._keys_added[set_id].update(distinct)
        for key in distinct:
            self._buckets[key][set_id] = size
            self._bucket_writes.append((key, set_id, size))
        if new:  # a set has one list of band keys: counted once, however often it is added
            self._bucketed.add(set_id)
            self._do("hset", self.k("bsize"), set_id, size)
            self._do("set", self.k("bk", set_id),
                     np.array(distinct, dtype=">i8").tobytes())
            self._count("bucket_entries", len(distinct))

    def _count(self, name: str, n: int) -> None:
        self._counted[name] += n  # one HINCRBY each at the commit

    # --- durability
    def commit(self) -> None:
        """Everything since the last commit in one MULTI/EXEC: all of it or none of it."""
        ops = [*self._ops, *write_ops(self.k, self._bucket_writes), *(
            ("hincrby", (self.k("counts"), c, n), {}) for c, n in self._counted.items() if n)]
        if not ops:
            return
        if self._lock is not None:
            if self._seq is not None:  # counted here since the last commit
                ops.append(("set", (self.k("seq"), self._seq), {}))
            self._lock.commit(ops)
        else:
            pipe = self.r.pipeline(transaction=True)
            for method, args, kwargs in ops:
                getattr(pipe, method)(*args, **kwargs)
            call(pipe.execute)
        self._reset()

    def commit_landed(self) -> bool:  # a group's member cannot tell (others write): False
        if landed := self._lock is not None and self._lock.landed():
            self._reset()
        return landed

    def rollback(self) -> None:
        self._reset()

    def close(self) -> None:
        self._reset()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self.r.close()

    def stats(self) -> dict[str, int]:
        """Counts of this namespace. ``bytes`` is 0: the server's memory is shared by every
        namespace in it (``INFO memory`` has the whole figure)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hlen(self.k("docs"))
        pipe.hgetall(self.k("counts"))
        docs, counts = call(pipe.execute)
        stored = {k.decode(): int(v) for k, v in counts.items()}
        return {"documents": int(docs) + self._doc_delta,
                **{name: stored.get(name, 0) + n for name, n in self._counted.items()},
                "bytes": 0}
