"""The SQLite store, one file per writer: ``store.py`` (the Store contract), ``file.py``
(schema, the one-writer lock, opening, errors), the in-memory maps rebuilt at open
(``bucket_index.py``, ``set_numbers.py``, ``edge_counts.py``) and saved at a clean close
(``snapshot.py``), and ``maintenance.py`` (stats, verify, compact, export)."""

from streamdedup.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
