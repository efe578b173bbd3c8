"""Stores behind one interface; ``open_store`` picks the backend and checks parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamdedup.errors import ConfigError
from streamdedup.store.base import DocRecord, SetRecord, Store, check_params

__all__ = ["DocRecord", "SetRecord", "Store", "open_store"]


def open_store(backend: str, location: str, params: Mapping[str, Any]) -> Store:
    """Open (or create) a store and make sure it was built with ``params``."""
    store: Store
    if backend == "memory":
        from streamdedup.store.memory import MemoryStore

        store = MemoryStore()
    elif backend == "sqlite":
        from streamdedup.store.sqlite import SqliteStore

        store = SqliteStore(location)
    else:
        raise ConfigError(f"unknown store backend {backend!r}")
    try:
        stored = store.get_params()
        if stored is None:
            store.put_params(params)
        else:
            check_params(stored, params)
    except BaseException:
        store.close()
        raise
    return store
