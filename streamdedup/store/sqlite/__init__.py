"""The SQLite store, one file per writer: ``store.py`` (the Store contract), ``file.py``
(schema, the one-writer lock, opening, errors), the in-memory maps (``bucket_index.py``
and ``set_numbers.py``, rebuilt at open unless ``snapshot.py`` saved them at a clean close;
``edge_counts.py``, counted once a set is touched), ``reader.py`` (reading beside the writer,
or on read-only media) and ``maintenance.py`` (stats, verify, compact, export, backup)."""

from streamdedup.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
