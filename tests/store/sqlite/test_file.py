"""The SQLite store's file: one writer (the lock), damage found and refused, schema upgrades,
file modes, rollbacks, what it keeps on disk; the contract every backend meets is in
tests/store/test_base.py."""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from mounts import tmpfs, umount
from shingle_sets import u64
from store_records import HIGH, PARAMS, band_keys, built, damage, rec, timed_set

from streamdedup.core.sketch import Sketcher
from streamdedup.errors import (
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreParamsError,
)
from streamdedup.settings import Settings
from streamdedup.store import open_store
from streamdedup.store.base import DocRecord, Evicted, SetRecord, Store
from streamdedup.store.payload import is_text
from streamdedup.store.sqlite import SqliteStore
from streamdedup.store.sqlite.file import (
    DB_NAME,
    LOCK_NAME,
    SCHEMA_VERSION,
    decode_log_row,
)
from streamdedup.store.sqlite.maintenance import export, verify
from streamdedup.store.sqlite.reader import read_verdict


def sqlite_dir(tmp_path: Path) -> Path:
    return tmp_path / "sqlite-store"


def test_sqlite_reopen_with_same_params_and_refusal_with_others(tmp_path: Path) -> None:
    d = str(sqlite_dir(tmp_path))
    open_store("sqlite", d, PARAMS).close()
    open_store("sqlite", d, PARAMS).close()  # JSON round trip keeps params equal
    other = Sketcher(Settings(shingle_size=9, stopwords="")).params()
    with pytest.raises(StoreParamsError) as err:
        open_store("sqlite", d, other)
    assert "shingle_size: store has 10, settings give 9" in str(err.value)
    assert "stopwords: store has 'it', settings give ''" in str(err.value)
    # The refused open released the store: it can be opened again.
    open_store("sqlite", d, PARAMS).close()


def test_sqlite_committed_writes_persist_and_uncommitted_are_discarded(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    s = SqliteStore(d)
    s.put_params(PARAMS)
    seq1 = s.next_seq()
    s.put_doc(DocRecord("kept", seq1, 1, "{}"))
    s.add_set(rec(1, seq=seq1, first_id="kept"), HIGH)
    s.add_edges(1, [(2, 0.9)])
    s.add_to_buckets(list(range(1000)), 1, 10)
    s.commit()
    seq2 = s.next_seq()
    s.put_doc(DocRecord("lost", seq2, 2, "{}"))
    s.add_set(rec(2, seq=seq2, first_id="lost"), HIGH[:1])
    s.set_parent(1, 2)
    s.add_to_buckets([5000], 2, 10)
    s.delete_doc("kept")
    s.close()

    s = SqliteStore(d)
    try:
        assert s.get_params() == PARAMS
        assert s.get_doc("kept") == DocRecord("kept", seq1, 1, "{}")
        assert s.get_doc("lost") is None
        assert s.get_sets([1, 2]) == {1: rec(1, seq=seq1, first_id="kept")}
        assert s.get_shingles([1])[1].tolist() == HIGH.tolist()
        assert s.neighbours(2) == [(1, 0.9)]
        assert s.probe([*range(1000), 5000]) == {1: 1000}
        # The sequence continues after the last committed number, never reusing one.
        assert s.next_seq() == seq1 + 1
    finally:
        s.close()


def test_sqlite_next_seq_persists_across_reopen(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    s = SqliteStore(d)
    last = [s.next_seq() for _ in range(5)][-1]
    s.commit()
    s.close()
    s = SqliteStore(d)
    assert s.next_seq() == last + 1
    s.close()


def test_sqlite_second_open_in_the_same_process_is_locked(
    make_store: Callable[..., Store], tmp_path: Path
) -> None:
    make_store("sqlite", sqlite_dir(tmp_path))
    with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}"):
        SqliteStore(sqlite_dir(tmp_path))


@pytest.mark.parametrize("removed", ["store.lock", "index.sqlite-wal", "both"])
def test_sqlite_second_writer_is_refused_whatever_files_are_removed(
    make_store: Callable[..., Store], tmp_path: Path, removed: str
) -> None:
    """Issue 17 item 6: deleting store.lock used to let a second writer in (and damage the
    store for good). The lock is on the directory, which no deletion inside it releases."""
    d = sqlite_dir(tmp_path)
    first = make_store("sqlite", d)
    first.put_doc(DocRecord("a", first.next_seq(), 0, "{}"))
    first.commit()
    for name in (["store.lock", "index.sqlite-wal"] if removed == "both" else [removed]):
        (d / name).unlink(missing_ok=True)
    with pytest.raises(StoreLockedError, match="one writer per store"):
        SqliteStore(d)


def test_sqlite_a_file_given_as_the_store_is_said_to_be_one(tmp_path: Path) -> None:
    """`check --store ads.tsv` said "[Errno 17] File exists" of the dump."""
    dump = tmp_path / "ads.tsv"
    dump.write_text("title\nt\n", encoding="utf-8")
    with pytest.raises(StoreError, match=r"ads.tsv is a file, not a directory: --store names"):
        SqliteStore(dump)
    assert dump.read_text(encoding="utf-8") == "title\nt\n"


def test_sqlite_read_only_directory_is_one_clear_error(tmp_path: Path) -> None:
    mnt = tmp_path / "ro"
    tmpfs(mnt, "1m", "ro")
    try:
        with pytest.raises(StoreError, match=r"is not writable .*Read-only file system"):
            SqliteStore(mnt / "store")
    finally:
        umount(mnt)


def test_sqlite_full_disk_is_said_as_such_not_as_damage(tmp_path: Path) -> None:
    """A full disk, on a new store and on an existing one, is 'no space left', never
    'cannot be read as a store' (which sounds like damage)."""
    mnt = tmp_path / "small"
    tmpfs(mnt, "256k")
    try:
        SqliteStore(mnt / "existing").close()
        with (mnt / "filler").open("wb") as fh, contextlib.suppress(OSError):
            fh.write(b"\0" * (1 << 20))
        for where in ("existing", "new"):
            with pytest.raises(StoreError, match="no space left on the device") as info:
                SqliteStore(mnt / where)
            assert not isinstance(info.value, StoreCorruptError)
    finally:
        umount(mnt)


def test_sqlite_second_open_in_another_process_is_locked(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    code = (
        "import sys\n"
        "from streamdedup.errors import StoreLockedError\n"
        "from streamdedup.store.sqlite import SqliteStore\n"
        "try:\n"
        "    SqliteStore(sys.argv[1]).close()\n"
        "except StoreLockedError as exc:\n"
        "    print('LOCKED', exc)\n"
        "else:\n"
        "    print('OPENED')\n"
    )

    def other_process() -> str:
        return subprocess.run(
            [sys.executable, "-c", code, str(d)], capture_output=True, text=True,
            check=True, timeout=60,
        ).stdout

    s = SqliteStore(d)
    try:
        out = other_process()
        assert out.startswith("LOCKED") and f"pid {os.getpid()}" in out
    finally:
        s.close()
    assert other_process().startswith("OPENED")  # the lock went with close()


def _filled_store(d: Path) -> None:
    s = open_store("sqlite", str(d), PARAMS)
    rng = np.random.default_rng(3)
    for i in range(400):
        s.add_set(rec(i), np.unique(rng.integers(0, 2**64, 200, dtype=np.uint64)))
        s.put_doc(DocRecord(f"doc-{i}", s.next_seq(), i, "{}"))
    s.commit()
    s.close()


@pytest.mark.parametrize("keep", [0.5, 0.1, 100 / 4096])
def test_sqlite_truncated_file_is_refused(tmp_path: Path, keep: float) -> None:
    d = sqlite_dir(tmp_path)
    _filled_store(d)
    db = d / DB_NAME
    data = db.read_bytes()
    db.write_bytes(data[: max(100, int(len(data) * keep))])
    with pytest.raises(StoreCorruptError):
        open_store("sqlite", str(d), PARAMS)


def test_sqlite_store_truncated_to_zero_bytes_is_refused(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    _filled_store(d)
    (d / DB_NAME).write_bytes(b"")
    for wal in d.glob(DB_NAME + "-*"):
        wal.unlink()
    with pytest.raises(StoreCorruptError, match="truncated"):
        open_store("sqlite", str(d), PARAMS)
    from streamdedup.store.sqlite.maintenance import stats

    with pytest.raises(StoreCorruptError, match="is empty: the store was truncated"):
        stats(d)  # it said "not a streamdedup store of schema 7 (user_version 0)"


def test_sqlite_store_creation_leaves_no_side_file(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    open_store("sqlite", str(d), PARAMS).close()
    assert (d / DB_NAME).stat().st_size > 0
    assert not (d / (DB_NAME + ".new")).exists()


def test_sqlite_damaged_page_is_refused(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    _filled_store(d)
    db = d / DB_NAME
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    data[5 * page : 7 * page] = np.random.default_rng(0).bytes(2 * page)
    db.write_bytes(bytes(data))
    with pytest.raises(StoreCorruptError):
        open_store("sqlite", str(d), PARAMS)


def _lose_a_leaf(d: Path) -> bytes:
    """Damage only the documents table, which reading the maps never meets: its root page
    forgets one leaf. Returns the damaged file's bytes."""
    _filled_store(d)
    db = d / DB_NAME
    conn = sqlite3.connect(db)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'docs'").fetchone()
    conn.close()
    data = bytearray(db.read_bytes())
    at = (root - 1) * page
    assert data[at] == 5  # an interior page: it points at the leaves of 400 documents
    cells = int.from_bytes(data[at + 3 : at + 5], "big")
    data[at + 3 : at + 5] = (cells - 1).to_bytes(2, "big")
    db.write_bytes(bytes(data))
    return bytes(data)


def test_sqlite_damage_found_by_the_structure_check_is_refused_before_any_write(
        tmp_path: Path) -> None:
    """The maps are read while ``PRAGMA quick_check`` runs beside them; damage that reading
    the maps does not meet is still refused, with the check's finding, and the file is left
    as it was: nothing is written before the check."""
    d = sqlite_dir(tmp_path)
    data = _lose_a_leaf(d)
    with pytest.raises(StoreCorruptError, match=r"(?s)is damaged: .*never used"):
        SqliteStore(d)
    assert (d / DB_NAME).read_bytes() == data


def test_sqlite_interrupted_open_stays_an_interrupt(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the maps are read is a KeyboardInterrupt, not the check's finding about
    a damaged file, and it leaves the store unlocked and unchanged."""
    d = sqlite_dir(tmp_path)
    data = _lose_a_leaf(d)

    def interrupted(self: SqliteStore, conn: sqlite3.Connection | None = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqliteStore, "_load_maps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        SqliteStore(d)
    monkeypatch.undo()
    assert (d / DB_NAME).read_bytes() == data
    with pytest.raises(StoreCorruptError, match="is damaged"):  # not StoreLockedError
        SqliteStore(d)


def test_sqlite_file_without_tables_becomes_a_store(tmp_path: Path) -> None:
    """As before the check ran beside the maps: an SQLite file with no tables (made by
    someone else, or emptied) is given the schema."""
    d = sqlite_dir(tmp_path)
    d.mkdir()
    damage(d, "CREATE TABLE t (x)", "DROP TABLE t")
    assert (d / DB_NAME).stat().st_size > 0
    s = SqliteStore(d)
    try:
        s.add_set(rec(1), HIGH)
        s.commit()
        assert s.get_sets([1])[1] == rec(1)
    finally:
        s.close()


def test_sqlite_sets_that_are_not_numbers_are_refused(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    _filled_store(d)
    damage(d, "UPDATE sets SET set_id = 'x' || set_id WHERE set_no = 7")
    with pytest.raises(StoreCorruptError, match="not set numbers"):
        SqliteStore(d)


def test_sqlite_non_database_file_is_refused(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    d.mkdir()
    (d / DB_NAME).write_bytes(b"this is not a database\n" * 400)
    with pytest.raises(StoreCorruptError, match="cannot be read as a store"):
        SqliteStore(d)
    # The failed open released the lock.
    (d / DB_NAME).unlink()
    SqliteStore(d).close()


def test_sqlite_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    d.mkdir()
    damage(d, "CREATE TABLE someone_elses (x)")
    with pytest.raises(StoreCorruptError, match=r"not a streamdedup store .* \(another "
                                                r"program's database\?"):
        SqliteStore(d)


def test_sqlite_store_of_an_earlier_layout_is_refused_with_a_way_out(tmp_path: Path) -> None:
    d = sqlite_dir(tmp_path)
    SqliteStore(d).close()
    damage(d, "PRAGMA user_version = 1")
    with pytest.raises(StoreCorruptError, match="earlier streamdedup's layout: replay"):
        SqliteStore(d)


def test_sqlite_store_of_a_newer_release_is_refused_as_such(tmp_path: Path) -> None:
    """A rollback after an upgrade: an older release met a newer schema and said only
    "not a streamdedup store of schema 5 (user_version 6)", as of a foreign file."""
    d = sqlite_dir(tmp_path)
    SqliteStore(d).close()
    damage(d, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreCorruptError, match="written by a newer streamdedup: run that"):
        SqliteStore(d)


def test_sqlite_a_verdict_damaged_on_disk_is_refused_on_read_not_returned(
        tmp_path: Path) -> None:
    """SQLite pages carry no checksum: a flipped digit in a stored verdict's JSON opened and
    was handed back as the document's verdict on redelivery (RELIABILITY, problem 4)."""
    d = sqlite_dir(tmp_path)
    store = SqliteStore(d)
    store.put_doc(DocRecord("a", 1, 7, '{"seq":1}'))
    store.put_doc(DocRecord("b", 2, 7, '{"seq":2}'))
    store.put_doc(DocRecord("a", 3, 8, '{"seq":3}'))  # a's first version is kept aside
    store.commit()
    store.close()
    damage(d, "UPDATE verdicts SET verdict = '{\"seq\":9}' WHERE verdict = '{\"seq\":1}'",
           "UPDATE verdicts SET verdict = '{\"seq\":8}' WHERE verdict = '{\"seq\":2}'")
    store = SqliteStore(d)
    try:
        assert store.get_doc("a") == DocRecord("a", 3, 8, '{"seq":3}')  # intact rows read
        for read in (lambda: store.get_doc("b"), lambda: store.get_docs(["a", "b"]),
                     lambda: store.get_version("a", 7)):
            with pytest.raises(StoreCorruptError, match=r"'[ab]' fails its checksum"):
                read()
        with pytest.raises(StoreCorruptError, match="fails its checksum"):
            read_verdict(d, "b")
        assert read_verdict(d, "a") == '{"seq":3}'
    finally:
        store.close()


def export_lines(directory: Path) -> list[str]:
    out = io.StringIO()
    export(directory, out)
    return out.getvalue().splitlines()


def test_sqlite_store_of_schema_5_is_upgraded_in_place(tmp_path: Path) -> None:
    """Schema 6 added the verdicts' checksums; a store of schema 5 keeps its rows (read as
    they are, without a checksum) and checks every verdict written after the upgrade."""
    d = sqlite_dir(tmp_path)
    verdicts = built(d, 30)
    damage(d, "ALTER TABLE verdicts DROP COLUMN checksum",
           "ALTER TABLE versions DROP COLUMN set_id", "PRAGMA user_version = 5")
    # Read-only commands beside a consumer of an older release: the store as it is.
    assert verify(d) == [] and read_verdict(d, "ad3") == verdicts[3]
    assert sum(1 for _ in export_lines(d)) == 30
    store = SqliteStore(d)
    assert store.get_doc("ad3").verdict == verdicts[3]  # type: ignore[union-attr]
    store.put_doc(DocRecord("new", 31, 7, '{"v":2}'))
    store.commit()
    store.close()
    conn = sqlite3.connect(d / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*), count(checksum) FROM verdicts").fetchone() == (31, 1)
    conn.close()
    damage(d, "DELETE FROM docs WHERE doc_id = 'new'", "DELETE FROM verdicts WHERE row = 31")
    assert verify(d) == []


def test_sqlite_store_of_schema_6_gets_its_versions_set_ids(tmp_path: Path) -> None:
    """Schema 7 names each version's set id: with retention a set's number goes when it
    leaves the window, while the version of a live id stays (sent again, its text was judged
    anew). An upgraded store's versions name their sets' ids, as a new store's do."""
    d = sqlite_dir(tmp_path)
    store = SqliteStore(d)
    store.put_doc(DocRecord("a", 1, 7, '{"v":1}'))
    store.put_doc(DocRecord("a", 2, 8, '{"v":2}'))
    store.commit()
    store.close()
    damage(d, "ALTER TABLE versions DROP COLUMN set_id", "PRAGMA user_version = 6")
    SqliteStore(d).close()
    conn = sqlite3.connect(d / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    assert conn.execute("SELECT doc_id, set_id FROM versions").fetchall() == [("a", 7)]
    conn.close()


def test_sqlite_an_upgrade_that_fails_leaves_the_store_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps and the version number go in one transaction: a step that fails (or a
    crash) must not leave schema 5's number on a changed table."""
    from streamdedup.store.sqlite import file as sqlite_file

    d = sqlite_dir(tmp_path)
    built(d, 10)
    damage(d, "ALTER TABLE verdicts DROP COLUMN checksum",
           "ALTER TABLE versions DROP COLUMN set_id", "PRAGMA user_version = 5")
    monkeypatch.setattr(sqlite_file, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(sqlite_file, "UPGRADES", {**sqlite_file.UPGRADES,
                                                  SCHEMA_VERSION: ("NOT SQL",)})
    with pytest.raises(StoreCorruptError):
        SqliteStore(d)
    conn = sqlite3.connect(d / DB_NAME)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(verdicts)")]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5 and "checksum" not in columns
    conn.close()
    monkeypatch.undo()
    SqliteStore(d).close()  # the real upgrade still goes through
    assert verify(d) == []


def test_sqlite_replaced_document_keeps_its_versions_and_no_orphan_verdict(
        tmp_path: Path) -> None:
    """Verdicts live in their own table: each is the first verdict of an (id, set) version,
    kept when the document is replaced or deleted, and no row is left that nothing names."""
    d = sqlite_dir(tmp_path)
    store = SqliteStore(d)
    store.put_doc(DocRecord("a", 1, 7, '{"v":1}'))
    store.put_doc(DocRecord("a", 2, 8, '{"v":2}'))
    store.put_doc(DocRecord("b", 3, 8, '{"v":3}'))
    store.delete_doc("b")
    store.commit()
    assert store.get_doc("a") == DocRecord("a", 2, 8, '{"v":2}')
    assert store.get_doc("b") is None
    store.close()
    conn = sqlite3.connect(d / DB_NAME)
    assert conn.execute("SELECT verdict FROM verdicts ORDER BY row").fetchall() == [
        ('{"v":1}',), ('{"v":2}',), ('{"v":3}',)]
    assert conn.execute("SELECT count(*) FROM verdicts WHERE row NOT IN (SELECT verdict_row "
                        "FROM versions UNION SELECT verdict_row FROM docs)").fetchone() == (0,)
    # A version row is written when its document is replaced, not with every document.
    assert conn.execute("SELECT doc_id, set_no FROM versions ORDER BY doc_id").fetchall() == [
        ("a", 1), ("b", 2)]
    conn.close()


def test_sqlite_store_with_a_version_row_for_every_document_reads_alike(
        tmp_path: Path) -> None:
    """Stores written before issue 15 hold a version row for every document, the current
    one included; the first verdict of each pair is still the one given back."""
    d = sqlite_dir(tmp_path)
    store = SqliteStore(d)
    store.add_set(SetRecord(7, 1, "a", 7), u64(1, 2, 3))
    store.add_set(SetRecord(8, 2, "a", 8), u64(4, 5, 6))
    store.put_doc(DocRecord("a", 1, 7, '{"v":1}'))
    store._conn.execute("INSERT INTO versions SELECT d.doc_id, d.set_no, d.verdict_row, "
                        "s.set_id FROM docs d JOIN sets s USING (set_no)")  # as upgraded
    assert store.get_version("a", 7) == '{"v":1}'
    store.delete_doc("a")
    store.put_doc(DocRecord("a", 2, 8, '{"v":2}'))
    store.commit()
    assert store.get_version("a", 7) == '{"v":1}' and store.get_version("a", 8) == '{"v":2}'
    store.forget_doc("a")
    store.commit()
    assert store.get_version("a", 7) is None and store.get_version("a", 8) is None
    assert store._conn.execute("SELECT count(*) FROM verdicts").fetchone() == (0,)
    store.close()


def test_sqlite_files_are_not_readable_by_others(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a permissive umask must not make the store world-readable
    try:
        d = sqlite_dir(tmp_path)
        s = open_store("sqlite", str(d), PARAMS)
        s.add_set(rec(1), HIGH)
        s.commit()
        files = [p for p in d.iterdir() if p.is_file()]
        assert {p.name for p in files} >= {DB_NAME, LOCK_NAME}
        for p in [*files, d]:
            mode = stat.S_IMODE(p.stat().st_mode)
            assert mode & 0o077 == 0, f"{p.name} has mode {oct(mode)}"
        s.close()
    finally:
        os.umask(old)


def test_sqlite_rollback_discards_pending_writes_and_cached_records(tmp_path: Path) -> None:
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        s.add_set(rec(1, seq=s.next_seq(), first_id="a"), HIGH)
        s.add_set(rec(2, seq=s.next_seq(), first_id="b"), HIGH[:2])
        s.commit()
        committed = s.get_sets([1, 2])
        s.set_parent(2, 1)
        s.add_set(rec(3, seq=s.next_seq(), first_id="c"), HIGH[:3])
        s.put_doc(DocRecord("c", 3, 3, "{}"))
        assert s.get_sets([2, 3])[2].parent == 1  # read back, and cached, before the rollback
        assert s.get_shingles([3])[3].size == 3
        assert s.members(3, 5) == [(3, "c")]
        s.rollback()
        assert s.get_sets([1, 2, 3]) == committed and s.members(3, 5) == []
        assert s.get_shingles([3]) == {} and s.get_doc("c") is None
        assert s.next_seq() == 3  # the arrival number comes again: nothing used it
        # The set numbering rolled back with the rows: the same set can come again.
        s.add_set(rec(3, seq=3, first_id="c"), HIGH[:3])
        s.put_doc(DocRecord("c", 3, 3, "{}"))
        s.commit()
    finally:
        s.close()
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        assert s.get_sets([3]) == {3: rec(3, seq=3, first_id="c")}
        assert s.members(3, 5) == [(3, "c")] and s.get_shingles([3])[3].size == 3
    finally:
        s.close()


def test_sqlite_params_written_after_other_writes_commit_them_as_commit_does(
        tmp_path: Path) -> None:
    """``put_params`` commits what was written before it (the parameters go through their
    own connection). The in-memory set numbers must take those writes as committed too: a
    later rollback that took them back numbered a committed set again, and the store could
    not be opened afterwards (a review's sequence of the eighth session)."""
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        s.add_set(rec(5, seq=s.next_seq(), first_id="a"), HIGH)
        s.put_params(PARAMS)
        s.rollback()
        assert s.get_sets([5]) == {5: rec(5, seq=1, first_id="a")}  # committed: it stays
        s.put_doc(DocRecord("b", s.next_seq(), 5, "{}"))
        s.commit()
        s.add_set(rec(4, seq=s.next_seq(), first_id="c"), HIGH[:2])
        s.commit()
        s.evict_set(4)
        s.rollback()
    finally:
        s.close()
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        assert set(s.get_sets([4, 5])) == {4, 5} and s.get_params() == PARAMS
    finally:
        s.close()


def test_sqlite_rollback_brings_back_a_tombstone_released_by_a_new_parent(tmp_path: Path
                                                                          ) -> None:
    """A tombstone whose last child moves to another parent goes (``_release``), in a
    transaction that evicts nothing: a rollback must bring back its set number too."""
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        s.add_set(SetRecord(1, s.next_seq(), "a", 1, last_time=10), HIGH)
        s.add_set(SetRecord(2, s.next_seq(), "b", 2, last_time=500), HIGH[:2])
        s.set_parent(2, 1)
        s.commit()
        s.evict(cutoff_ms=100, limit=10)  # set 1 left the window; its child keeps it
        s.commit()
        tomb = s.get_sets([1])[1]
        assert tomb.evicted and tomb.children == 1
        s.set_parent(2, 2)  # its last child leaves: the tombstone goes
        assert s.get_sets([1]) == {}
        s.rollback()
        assert s.get_sets([1]) == {1: tomb}
    finally:
        s.close()
    s = SqliteStore(sqlite_dir(tmp_path))
    try:
        assert s.get_sets([1]) == {1: tomb}
    finally:
        s.close()


def test_sqlite_set_numbered_twice_is_refused(tmp_path: Path) -> None:
    s = SqliteStore(sqlite_dir(tmp_path))
    s.add_set(rec(1), HIGH)
    s.put_doc(DocRecord("a", 1, 2, "{}"))
    s.commit()
    s.close()
    damage(sqlite_dir(tmp_path), "UPDATE sets SET set_id = 1")
    with pytest.raises(StoreCorruptError, match="numbered twice"):
        SqliteStore(sqlite_dir(tmp_path))


def test_sqlite_flipped_bit_in_a_shingle_set_is_detected(tmp_path: Path) -> None:
    import sqlite3

    d = sqlite_dir(tmp_path)
    store = open_store("sqlite", str(d), PARAMS)
    store.add_set(rec(7), np.arange(1, 50, dtype=np.uint64))
    store.commit()
    store.close()
    conn = sqlite3.connect(d / DB_NAME)
    (row, blob) = conn.execute(
        "SELECT b.row, b.data FROM sets s JOIN shingles b ON b.row = s.shingles_row "
        "WHERE s.set_id = 7").fetchone()
    damaged = bytearray(blob)
    damaged[17] ^= 0x04
    conn.execute("UPDATE shingles SET data = ? WHERE row = ?", (bytes(damaged), row))
    conn.commit()
    conn.close()
    store = open_store("sqlite", str(d), PARAMS)
    try:
        with pytest.raises(StoreCorruptError, match="checksum"):
            store.get_shingles([7])
    finally:
        store.close()


def test_sqlite_keeps_texts_and_reads_the_same_hashes_back(tmp_path: Path) -> None:
    sk = Sketcher(Settings())
    d = sqlite_dir(tmp_path)
    store = open_store("sqlite", str(d), PARAMS)
    before = sk.shingle_fields({"description": "Cercasi sviluppatore Python a Milano"})
    store.add_set(rec(1), before.shingles, before.text)  # no shingler yet: hashes
    store.keep_texts(sk.reshingle)
    ads = [sk.shingle_fields({"description": f"Offerta {i}: magazziniere a Torino, turno "
                                             f"{'notte' if i % 2 else 'giorno'} {i * 7}"})
           for i in range(2, 40)]
    for i, sh in enumerate(ads, 2):
        store.add_set(rec(i), sh.shingles, sh.text)
    store.commit()
    store.close()
    conn = sqlite3.connect(d / DB_NAME)
    kinds = [is_text(blob) for (blob,) in conn.execute("SELECT data FROM shingles ORDER BY row")]
    conn.close()
    assert kinds == [False] + [True] * len(ads)  # a store holds both kinds
    store = open_store("sqlite", str(d), PARAMS)
    try:
        with pytest.raises(StoreError, match="kept as text"):  # reading text takes a shingler
            store.get_shingles([2])
        assert np.array_equal(store.get_shingles([1])[1], before.shingles)
        store.keep_texts(sk.reshingle)
        got = store.get_shingles(range(1, len(ads) + 2))
        assert np.array_equal(got[1], before.shingles)
        for i, sh in enumerate(ads, 2):
            assert np.array_equal(got[i], sh.shingles), i
    finally:
        store.close()
    from streamdedup.store.sqlite.maintenance import verify

    assert verify(d) == []



# --- eviction and rollback at the edges a mutation sweep found unpinned (twenty-sixth session)


def test_rollback_takes_back_bucket_adds(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 5)
    s.commit()
    timed_set(s, 2, 5)
    s.rollback()
    assert s.probe(band_keys(1) + band_keys(2)) == {1: 25}
    s.commit()
    s.close()
    s = SqliteStore(tmp_path / "s")
    assert s.probe(band_keys(1) + band_keys(2)) == {1: 25}
    s.close()


def test_an_evicted_set_takes_its_remaining_documents(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    s.add_set(SetRecord(1, s.next_seq(), "d1", 1, last_time=1), HIGH)
    for t in (1, 2, 3):
        s.put_doc(DocRecord(f"d{t}", s.next_seq(), 1, "{}", t))
    s.commit()
    s.evict(cutoff_ms=10, limit=1)  # one document by time, then the set (newest time 3)
    s.commit()
    assert [s.get_doc(f"d{t}") for t in (1, 2, 3)] == [None, None, None]
    assert s._conn.execute("SELECT count(*) FROM docs").fetchone()[0] == 0
    assert s._conn.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 0
    s.close()


def test_an_evicted_crowded_set_comes_back_uncrowded(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    s.add_set(SetRecord(1, s.next_seq(), "a", 1, last_time=1), HIGH)
    s.add_edges(1, [(i, 0.9) for i in range(2, 8)], cap=4)
    assert s.neighbours(1) is None
    s.commit()
    s.evict(cutoff_ms=10, limit=10)
    s.commit()
    assert s._conn.execute("SELECT count(*) FROM crowded").fetchone()[0] == 0
    s.add_set(SetRecord(1, s.next_seq(), "b", 1, last_time=20), HIGH)
    s.add_edges(1, [(2, 0.5)], cap=4)
    assert s.neighbours(1) == [(2, 0.5)]
    s.close()


def test_a_tombstone_is_evicted_once(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    s.add_set(SetRecord(1, s.next_seq(), "a", 1, last_time=1), HIGH)
    s.add_set(SetRecord(2, s.next_seq(), "b", 2, last_time=500), HIGH[:2])
    s.set_parent(2, 1)
    s.commit()
    assert s.evict(cutoff_ms=100, limit=10) == Evicted(0, 1)
    s.commit()
    assert s.get_sets([1])[1].evicted
    assert s.evict(cutoff_ms=100, limit=10) == Evicted(0, 0)
    s.close()


def test_a_rolled_back_tombstoning_keeps_the_sets_buckets(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 1)
    timed_set(s, 2, 500)
    s.set_parent(2, 1)
    s.commit()
    s.evict(cutoff_ms=100, limit=10)
    assert s.probe(band_keys(1)) == {}
    s.rollback()
    assert s.probe(band_keys(1)) == {1: 25}
    s.close()


def test_an_eviction_failing_halfway_then_rolled_back_keeps_buckets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 1)
    s.commit()

    def boom(set_id: int) -> None:
        raise StoreError("disk went away")

    monkeypatch.setattr(s, "_release", boom)
    with pytest.raises(StoreError):
        s.evict(cutoff_ms=100, limit=10)
    monkeypatch.undo()
    s.rollback()
    assert s.probe(band_keys(1)) == {1: 25}
    s.commit()
    s.close()
    s = SqliteStore(tmp_path / "s")
    assert s.probe(band_keys(1)) == {1: 25}
    s.close()


def test_a_sparse_log_row_is_relogged_with_every_key(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    for i in range(9):  # 1 live of 9: under an eighth
        timed_set(s, i, 1000 if i == 0 else 1)
    s.commit()
    s.evict(cutoff_ms=10, limit=100)
    assert s.probe(band_keys(0)) == {0: 25}
    s.commit()
    rows = s._conn.execute("SELECT row, set_ids, sizes, counts, keys FROM bucket_log").fetchall()
    assert [decode_log_row(*b).set_ids.tolist() for _, *b in rows] == [[0]]
    s.close()
    s = SqliteStore(tmp_path / "s")
    assert s.probe(band_keys(0)) == {0: 25}
    s.close()


@pytest.mark.parametrize("linked", ["directory", "file"])
def test_a_store_linked_to_nothing_is_refused_and_the_link_kept(tmp_path: Path,
                                                                linked: str) -> None:
    """A store on a volume not mounted: the directory said "[Errno 17] File exists", and a
    file linked to nothing was replaced by a new empty store (the link gone, exit 0)."""
    from streamdedup.store.sqlite import SqliteStore

    target = tmp_path / "volume" / "gone"
    store = tmp_path / "s"
    if linked == "directory":
        store.symlink_to(target)
        link = store
    else:
        store.mkdir()
        link = store / "index.sqlite"
        link.symlink_to(target)
    with pytest.raises(StoreError, match=f"{link} is a link to {target}, which is not there "
                                         r"\(a volume not mounted\?\)"):
        SqliteStore(store)
    from streamdedup.store.sqlite.maintenance import stats

    with pytest.raises(StoreError, match="which is not there"):
        stats(store)  # it said "no store at s (no index.sqlite)"
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert not (tmp_path / "volume").exists()
