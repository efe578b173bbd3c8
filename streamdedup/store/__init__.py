"""Stores behind one interface; ``open_store`` picks the backend and checks parameters."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamdedup.errors import ConfigError, StoreCorruptError, StoreParamsError
from streamdedup.settings import Settings
from streamdedup.store.base import DocRecord, SetRecord, Store, check_params, missing_params

log = logging.getLogger(__name__)

__all__ = ["DocRecord", "SetRecord", "Store", "open_configured", "open_store", "read_params",
           "read_verdict"]


def open_configured(settings: Settings, params: Mapping[str, Any]) -> Store:
    """The store the settings name: a directory, a Redis URL, or memory."""
    location = settings.redis_url if settings.store_backend == "redis" else settings.store
    if settings.store_backend == "sqlite" and not location.strip():
        raise ConfigError("store must name a directory (--store or STREAMDEDUP_STORE is empty: "
                          "an empty one put the store's files in the current directory)")
    store = open_store(settings.store_backend, location, params, settings.redis_namespace,
                       settings.redis_cluster, single_writer=settings.retention_ms is not None)
    untimed = getattr(store, "untimed_documents", None)  # SQLite's (Redis refuses the mix)
    if settings.retention_ms is not None and untimed is not None and (count := untimed()):
        log.warning("%s documents of this store were judged without --retention: they have "
                    "no time, so the window never lets them go (rebuild the store with "
                    "--retention to have them expire; docs/RETENTION.md)", f"{count:,}")
    elif settings.retention_ms is None and store.get_clock() is not None:  # said the other way
        log.warning("this store was run with --retention (it has a retention clock), and this "
                    "run has none: what it judges gets no time, so the window will never let "
                    "it go, and nothing expires meanwhile; give the store's --retention again "
                    "(docs/RETENTION.md)")
    return store


def open_store(backend: str, location: str, params: Mapping[str, Any],
               namespace: str = Settings.redis_namespace, cluster: bool = False,
               single_writer: bool = False) -> Store:
    """Open (or create) a store and make sure it was built with ``params``. ``location`` is
    a directory (sqlite) or a URL (redis, whose keys live under ``namespace``; ``cluster``:
    a Redis Cluster). Redis is opened as a shared store, which any number of consumers use
    at once, unless ``single_writer`` (retention: the shared protocol does not evict), when
    one process holds the namespace's writer lock."""
    store: Store
    if backend == "memory":
        from streamdedup.store.memory import MemoryStore

        store = MemoryStore()
    elif backend == "sqlite":
        from streamdedup.store.sqlite import SqliteStore

        store = SqliteStore(location)
    elif backend == "redis":
        if single_writer:
            from streamdedup.store.redis import RedisStore

            store = RedisStore(location, namespace, cluster, writer_lock=True)
        else:
            from streamdedup.store.redis import SharedRedisStore

            store = SharedRedisStore(location, namespace, cluster)
    else:
        raise ConfigError(f"unknown store backend {backend!r}")
    try:
        stored = store.get_params()
        if stored is None:
            held = store.stats()["documents"]
            if held:
                raise StoreCorruptError(missing_params(held))
            store.put_params(params)
        else:
            check_params(stored, params)
    except StoreParamsError as exc:
        empty = _holds_nothing(store)
        store.close()
        if empty:  # a run refused at once (topics missing) had pinned its settings
            raise StoreParamsError(f"{exc}\n  it holds no documents (made by a run that "
                                   "stopped before judging any): removing it loses "
                                   "nothing") from None
        raise
    except BaseException:
        store.close()
        raise
    return store


def _holds_nothing(store: Store) -> bool:
    try:
        return not store.stats()["documents"]
    except Exception:  # what the store cannot say is not said
        return False


def read_params(settings: Settings) -> dict[str, Any] | None:
    """The parameters the settings' store was built with, read as ``read_verdict`` reads:
    nothing written, no lock taken; None before its first run."""
    if settings.store_backend == "sqlite":
        from streamdedup.store.sqlite.reader import read_params as from_file

        return from_file(Path(settings.store))
    if settings.store_backend == "redis":
        from streamdedup.store.redis.maintenance import read_params as from_redis

        return from_redis(settings.redis_url, settings.redis_namespace, settings.redis_cluster)
    return None  # memory: no store between processes


def read_verdict(settings: Settings, doc_id: str) -> str | None:
    """A document's stored verdict JSON (None when it has none: unknown, or still being
    judged), read beside running consumers: nothing is written
    and no writer lock taken (opening the store would wait for the consumer's, or write a
    new store's parameters where there was none)."""
    if settings.store_backend == "sqlite":
        from streamdedup.store.sqlite.reader import read_verdict as from_file

        return from_file(Path(settings.store), doc_id) or None  # '' while being judged
    if settings.store_backend == "redis":
        from streamdedup.store.redis.maintenance import read_verdict as from_redis

        return from_redis(settings.redis_url, settings.redis_namespace, doc_id,
                          settings.redis_cluster)
    raise ConfigError(f"a {settings.store_backend} store keeps nothing between processes: "
                      "there is no stored verdict to read (give --store or --redis-url)")
