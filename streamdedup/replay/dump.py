"""Reading historical dumps: the Kijiji TSV (quoted multi-line fields), JSONL and Parquet.

Rows come back in file order as ``(position, Document | MessageError)``, so one bad row
becomes an error record and the rest of the file is still read. A row larger than
``max_bytes`` (the consumer's ``--max-message-bytes``) is an ``oversized`` error; a JSONL line
over it is never held in memory whole (a 40 MB line used to cost 1.37 GB on its way through
``check``), a TSV field is read up to 4 Mi characters (``FIELD_BOUND``; past that the read
stops with an error, since where the field ends cannot be told, unless its line is a whole
row by itself: see ``_tsv_rows``, which also reads a quote left open).
A TSV without an ``id`` column uses the 0-based row index (in file order, header excluded)
as the id. Parquet (the ``parquet`` extra, pyarrow) is read in batches of 1,024 rows (so a
batch is held whole, whatever ``max_bytes`` says); its text columns must be strings, as in
JSONL; other columns that hold numbers, booleans, dates or timestamps become strings
(timestamps in ISO 8601 to the microsecond, so ``--order-by timestamp`` reads them), and
decimals their decimal text; columns of other types (binary, nested...) are left out, as
JSONL leaves out nested values, booleans and nulls (its numbers are kept as their decimal
text). A blank id, in a TSV or a Parquet string column, is no id, as a null. With
``time_field`` (given when retention is on) each row's time is read from that column, as a
message's is (``service/message.py``).
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any, BinaryIO

from streamdedup.core.document import Document
from streamdedup.errors import ConfigError, InputError, MessageError
from streamdedup.extras import require
from streamdedup.replay.json_array import array_items, is_array
from streamdedup.service.message import (
    decode_message,
    document_from_object,
    encode_message,
    has_value,
    with_id_field,
)
from streamdedup.settings import Settings

log = logging.getLogger(__name__)
Row = tuple[int, Document | MessageError]
FORMATS = ("tsv", "jsonl", "parquet")


def batched(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    """Rows in lists of ``size`` (the last one shorter), as ``check`` judges them. A read
    that stops (``InputError``: a field too long to read past) first hands over the rows
    before it: they were lost with their batch, up to 499 of them, though the message said
    only the rows after it were not read."""
    batch: list[Row] = []
    try:
        for row in rows:
            batch.append(row)
            if len(batch) >= size:
                yield batch
                batch = []
    except InputError:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".tab"):
        return "tsv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    # a setting to give, not a dump to fix: exit 2, as a value refused at parsing
    raise ConfigError(f"cannot tell the format of {path}; pass --format tsv, jsonl or parquet")


def read_dump(path: str | os.PathLike[str], fmt: str | None, text_fields: tuple[str, ...],
              *, max_bytes: int = Settings.max_message_bytes, time_field: str = "",
              optional: tuple[str, ...] = (), id_field: str = Settings.id_field) -> Iterator[Row]:
    """The dump's rows. A TSV's header is read and checked here, before the caller opens its
    store or outputs (an error found at the first row had emptied an existing ``--out``): a
    header without any of the text fields is an error, one without some of them a warning (a
    misspelt ``--text-fields`` name was silently read as "no such text"), and a column read
    that the header names twice an error. ``optional``: more
    fields to keep when a row has them (replay's location, link). ``id_field`` (``--id-field``):
    the column holding each row's id, which must then be there (but a JSON line without it,
    which gets the automatic id, as one without ``id`` does)."""
    path = Path(path)
    if not path.is_file():
        if str(path) == "-" or path.exists():  # standard input, a pipe, a device, a folder
            raise InputError(f"{path} is not a regular file: a dump is read from a file "
                             f"(twice: its header first), not from a stream")
        raise InputError(f"no such file: {path}")
    fmt = fmt or detect_format(path)
    also = tuple(f for f in dict.fromkeys(optional) if f not in text_fields)
    if fmt == "tsv":  # (a TSV's cells are all text: read as text fields)
        return _read_tsv(path, text_fields, (*text_fields, *also), max_bytes, time_field,
                         id_field)
    if fmt == "jsonl":
        rows = _read_jsonl(path, text_fields, also, max_bytes, time_field, id_field)
        return rows if id_field == "id" else _said_automatic(rows, path, id_field)
    if fmt == "parquet":
        return _read_parquet(path, text_fields, also, max_bytes, time_field, id_field)
    raise InputError(f"unknown format {fmt!r}; use tsv, jsonl or parquet")


def row_number_warning(path: Path, fmt: str | None, held: Callable[[], int] | None,
                       id_field: str = Settings.id_field, named: Callable[[str], bool] | None = None
                       ) -> str | None:
    """What to say when a TSV without an ``id`` column goes into a store that holds
    documents (``held()``, asked only then; None: a topic, whose consumer's store is not
    known here): its rows' ids are their numbers, which any other such dump repeats, so its
    row 0 replaced the earlier dump's document "0" (two days' dumps kept one day's ads).
    And the other way round (``named``: whether the store holds a document of that id): a
    TSV whose ids come from a column, into a store of row numbers. The Kijiji dump checked
    once as it is, then again with ``--id-field link``, flagged each of its 3,127 ads as a
    duplicate of its own row number, without a word."""
    if (fmt or detect_format(path)) != "tsv":
        return None
    header = tsv_header(path)
    if id_field in header:
        return _numbered_store_warning(path, header, id_field, named)
    if held is None:
        return (f"warning: {path} has no id column, so its rows' ids are their numbers (0, 1, "
                f"...), which any other such dump repeats: a consumer's store replaces the "
                f"document a number names, if another dump sent it. Give the dump an id "
                f"column, or name the column that holds its ids (--id-field link), to keep "
                f"both")
    held_documents = held()
    if not held_documents:
        return None
    return (f"warning: {path} has no id column, so its rows' ids are their numbers (0, 1, "
            f"...), and the store already holds {held_documents:,} documents: a row replaces "
            f"the one its number names, if another dump put it there. Give the dump an id "
            f"column, or name the column that holds its ids (--id-field link), to keep both")


def _numbered_store_warning(path: Path, header: list[str], id_field: str,
                            named: Callable[[str], bool] | None) -> str | None:
    """The warning for a TSV of column ids into a store that holds documents "0" and "1"
    (a dump's row numbers), unless the TSV's own ids are numbers too (its first is): then
    the store's "0" is as likely one of its own (a day's dump of ids 0 to 1,499, then the
    next day's from 1,500, was warned of)."""
    if named is None or not (named("0") and named("1")):
        return None
    with _tsv_reader(path) as rows:
        try:
            # the first row that holds something (the reading skips an empty line, and a
            # line of empty fields has no id to look at)
            first = next((row for row in itertools.islice(rows, 1, None)
                          if any(value.strip() for value in row)), None)
        except csv.Error:  # a row the reading itself will say (a field over the bound)
            first = None
    column = header.index(id_field)
    if first is not None and len(first) > column and first[column].strip().isdigit():
        return None
    again = " (or without --id-field, as it was judged before)" if id_field != "id" else ""
    return (f"warning: the store holds documents named 0, 1, ..., as a TSV without an id "
            f"column names its rows, and {path}'s ids come from its column {id_field!r}: an "
            f"ad the store holds under its row number will be flagged as a duplicate of "
            f"that number. If the store's documents came from this dump, judge it into a "
            f"new --store{again}")


@contextlib.contextmanager
def _tsv_reader(path: Path) -> Iterator[Iterator[list[str]]]:
    """A TSV's rows as the csv module reads them, from its header on (an Excel export's
    byte order mark is not part of the first column's name)."""
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        yield csv.reader(fh, delimiter="\t")


def tsv_header(path: Path) -> list[str]:
    """A TSV's column names."""
    with _tsv_reader(path) as rows:
        try:
            return next(rows)
        except StopIteration:
            raise InputError(f"{path} is empty: a TSV dump starts with a header line "
                             f"naming its columns (a JSON lines dump may be empty)") from None
        except csv.Error as exc:
            raise InputError(f"{path} is not a TSV file: {exc}") from None


def _header_said(header: list[str]) -> str:
    """The header as an error shows it: a JSON line's whole record, or a binary file's bytes,
    were printed as the "header" (hundreds of characters, or ``\\udc89PNG``)."""
    first = header[0] if header else ""
    if any(_has_surrogates(name) for name in header):
        return "the first line is not UTF-8 text: is this a TSV file?"
    if first.lstrip().startswith(("{", "[")):
        return "the first line looks like JSON: --format jsonl?"
    names = [name if len(name) <= 40 else name[:40] + "..." for name in header[:10]]
    return "header: " + ", ".join(names) + (", ..." if len(header) > 10 else "")


def _other_case(text_fields: tuple[str, ...], header: list[str]) -> str:
    """The flag that reads a header whose names differ from the text fields in case alone
    (an export's "Title", "Description"): names are read as written."""
    by_lower = {name.lower(): name for name in header}
    found = [by_lower[f.lower()] for f in text_fields if f.lower() in by_lower]
    return f"; names are read as written: --text-fields {','.join(found)}?" if found else ""


def _read_tsv(path: Path, text_fields: tuple[str, ...], fields: tuple[str, ...],
              max_bytes: int, time_field: str, id_field: str) -> Iterator[Row]:
    header = tsv_header(path)
    missing = [f for f in text_fields if f not in header]
    if missing == list(text_fields):
        raise InputError(f"{path}: header has none of the text fields "
                         f"{', '.join(text_fields)} ({_header_said(header)})"
                         + _other_case(text_fields, header))
    if id_field != "id" and id_field not in header:
        raise InputError(f"{path}: header has no column {id_field!r} to read the ids from "
                         f"(--id-field; {_header_said(header)})")
    twice = [name for name in dict.fromkeys((*fields, id_field, time_field))
             if name and header.count(name) > 1]
    if twice:  # each row's dict kept the last of them, silently
        raise InputError(f"{path}: header names {', '.join(map(repr, twice))} more than once "
                         f"(columns {', '.join(str(i) for i, h in enumerate(header) if h in twice)}"
                         f", from 0): which one to read cannot be told")
    if missing:  # a dump may lack one (descriptions only); a misspelt name looks the same
        log.warning("%s has no column %s: the text is %s alone (header: %s)", path,
                    " or ".join(map(repr, missing)),
                    ", ".join(f for f in text_fields if f not in missing), ", ".join(header[:10]))
    return _tsv_rows(path, header, fields, max_bytes, time_field, id_field)


# The csv module's bound on one field, in characters. Over it, the module raises mid-field
# and reads on from there: the rest of a quoted multi-line field came back as thousands of
# rows (one 1.2 MB description under a 1 MiB limit made 8,698 documents of a 3-row file), so
# the bound is set far above any ad, a row over ``max_bytes`` is measured once read, and a
# field over the bound stops the read.
FIELD_BOUND = 4 << 20  # 4x the default message limit; up to ~16 MB of str a field


# A row that has taken in this many lines, each a whole row by itself, is cut there and read
# as its first line: a quote reopened on every line made each row run to the end of the file
# (20,000 such lines took 26 s; 0.75 s cut at 100). A quoted field's own lines (a long last
# column) are not whole rows, so such a field is read whole, however long.
RUNAWAY_LINES = 100


class _Lines:
    """A TSV's lines for ``csv.reader``, each row's kept until the next one starts, and
    lines given back to be read again: what lets a row that swallowed the lines after it
    (a quote left open) be read again from its second line. A row of ``RUNAWAY_LINES``
    lines that are each a whole row (``columns`` fields by tabs) is cut: the reader is told
    the file ends, inside a quoted field (the only place it asks for a row's next line),
    so that it raises and the row is read as its first line."""

    def __init__(self, fh: Iterator[str], columns: int) -> None:
        self._fh = fh
        self._columns = columns
        self._back: list[str] = []  # given back, the next one last
        self.number = 0  # of the last line handed out, from 1 (the header's is 1)
        self.row: list[str] = []  # the lines of the row being read
        self._whole = True  # every line of the row so far is a whole row by itself

    def start_row(self) -> None:
        self.row, self._whole = [], True

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if len(self.row) >= RUNAWAY_LINES and self._whole and _alone(self.row[0],
                                                                      self._columns):
            raise StopIteration
        line = self._back.pop() if self._back else next(self._fh)
        self.number += 1
        self.row.append(line)
        if self._whole and len(self.row) > 1:  # the lines it took in (its first: at the cut)
            self._whole = _alone(line, self._columns) is not None
        return line

    def again(self, lines: list[str]) -> None:
        self._back.extend(reversed(lines))
        self.number -= len(lines)


def _alone(line: str, columns: int) -> list[str] | None:
    """The line's values when it is a whole row read with its quotes as characters (tabs
    alone separate them, so no field bound applies), else None."""
    values = line.rstrip("\r\n").split("\t")
    return values if len(values) == columns else None


# Rows read with their quotes as characters, said one by one up to this many (then counted).
_SAID_REREAD = 5


def _tsv_rows(path: Path, header: list[str], fields: tuple[str, ...], max_bytes: int,
              time_field: str, id_field: str) -> Iterator[Row]:
    """The rows after the header. A quote that opens a field and is never closed (a scraper
    that writes tabs between fields but does not quote them) made one row of every line up
    to the next quote character: one stray quote lost 290 of a 300-row file inside one
    malformed row, with exit 0. The rows are read strictly (a quote that closes a field must
    be followed by a tab or the end of the line; the file must not end inside a quoted
    field): a row that breaks those rules, whose first line is a whole row by itself, is
    read as that line, its quotes as characters, and the lines after it again. A row read
    within the rules but with another number of fields than the header stays a
    ``malformed_row`` (its quoting may be right: re-reading its first line made wrong
    documents of a quoted field holding a tab), as does a field over the bound past its
    first line (which stops the read: where it ends cannot be told)."""
    bound = min(sys.maxsize, max(max_bytes, FIELD_BOUND))
    csv.field_size_limit(bound)
    reread = 0
    keys = _keys_bound(header)
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        lines = _Lines(fh, len(header))
        next(csv.reader(lines, delimiter="\t"))  # the header, read as tsv_header reads it
        reader = csv.reader(lines, delimiter="\t", strict=True)
        index = 0
        while True:
            first = lines.number + 1
            lines.start_row()
            try:
                values = next(reader)
            except StopIteration:
                if reread > _SAID_REREAD:
                    log.warning("%s: %d rows in all were read with their quotes as "
                                "characters", path, reread)
                return
            except csv.Error as exc:
                over = "field larger than field limit" in str(exc)
                alone = (_alone(lines.row[0], len(header))
                         if lines.row and (not over or len(lines.row) == 1) else None)
                if alone is None and over:
                    raise InputError(
                        f"{path}: row {index} (line {first}) has a field over {bound:,} "
                        "characters, and where it ends cannot be told: the rows after it "
                        "are not read (fix or cut that row)") from None
                if alone is None:
                    yield index, MessageError("malformed_row",
                                              f"{exc}{_lines(first, lines.number)}")
                    index += 1
                    continue
                reread += not over  # (a line over the bound is oversized, not misquoted)
                if reread <= _SAID_REREAD and not over:
                    taken = (f" and line{'s' if len(lines.row) > 2 else ''} "
                             f"{_span(first + 1, lines.number)}, which a quote had taken in, "
                             "read again" if len(lines.row) > 1 else "")
                    log.warning("%s: row %d (line %d) has quotes a TSV's quoted fields do "
                                "not have (%s); the line is a whole row with them as "
                                "characters, so it is read as one%s", path, index, first,
                                str(exc).replace("\t", "\\t"), taken)
                lines.again(lines.row[1:])
                values = alone
            if not values:  # a blank line (an editor's last one) was a bad row; JSON Lines
                index += 1  # skips them too. Its number is kept: row numbers are ids
                continue
            if len(values) != len(header):
                yield index, MessageError("malformed_row", f"{len(values)} fields where the "
                                          f"header has {len(header)}"
                                          f"{_lines(first, lines.number)}")
                index += 1
                continue
            size = sum(len(v) for v in values)  # characters: 1 to 4 UTF-8 bytes each
            if size * 4 > max_bytes:  # bytes, as a message's (the file's bytes, as read)
                size = sum(len(v.encode("utf-8", "surrogateescape")) for v in values)
            if size > max_bytes:
                yield index, MessageError("oversized", f"{size} bytes > limit {max_bytes}")
            else:
                row = _tsv_row(index, header, values, fields, time_field, id_field)
                yield index, _as_sent(row, size, max_bytes, keys)
            index += 1


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _lines(first: int, last: int) -> str:
    """Where a bad row was in the file: a quote left open makes one "row" of the lines up to
    the next quote (four good rows were lost inside one malformed row, unnamed)."""
    if last <= first:
        return f" (line {first})"
    return (f" (lines {first}-{last} of the file: if a quote was left open at line "
            f"{first}, the lines up to the next quote were read as this one row)")


def _keys_bound(names: Iterable[str]) -> int:
    """At most the bytes a message spends on these keys, their quotes and separators, and a
    number's digits (6 bytes a character: ``\\u0001``)."""
    return 6 * sum(len(n) + 24 for n in names) + 16


def _as_sent(item: Document | MessageError, size: int, max_bytes: int,
             keys: int) -> Document | MessageError:
    """A row of ``size`` bytes of values within ``max_bytes``, measured again as the message
    ``produce`` sends when that could be over (``keys``: ``_keys_bound`` of its fields): JSON's
    keys, quotes and escapes made a row ``check`` judged a message ``run`` refused."""
    if isinstance(item, MessageError) or 6 * (size + len(item.id)) + keys <= max_bytes:
        return item
    sent = len(encode_message(item))
    if sent <= max_bytes:
        return item
    return MessageError("oversized", f"{sent} bytes as a message > limit {max_bytes}")


def _tsv_row(
    index: int, header: list[str], values: list[str], text_fields: tuple[str, ...],
    time_field: str, id_field: str,
) -> Document | MessageError:
    row = dict(zip(header, values, strict=True))  # as many as the header (checked)
    if any(_has_surrogates(v) for v in values):
        return MessageError("not_utf8", "the row has bytes that are not UTF-8")
    if id_field != "id":  # (its column checked at the header) the rule messages follow
        row = with_id_field(row, id_field)[0]
    elif "id" not in row:
        row["id"] = str(index)
    if "id" in row and not row["id"].strip():  # a TSV's only way to say "none", as a
        del row["id"]  # Parquet null or a JSON line without one: the automatic id
    try:
        return document_from_object(row, text_fields, time_field)
    except MessageError as exc:
        return exc


def _said_automatic(rows: Iterator[Row], path: Path, id_field: str) -> Iterator[Row]:
    """The rows, then a warning of how many had no ``id_field`` (a JSON line without it gets
    its ``id``, else the automatic id): a misspelt ``--id-field lnk`` gave every verdict an
    automatic id without a word."""
    without = documents = 0
    for row in rows:
        if isinstance(row[1], Document):
            documents += 1
            without += not has_value(row[1].fields.get(id_field))
        yield row
    if without:
        log.warning("%s: %d of %d documents have no %r (--id-field): their ids are their "
                    "'id', or made from their content", path, without, documents, id_field)


def _read_jsonl(path: Path, text_fields: tuple[str, ...], also: tuple[str, ...],
                max_bytes: int, time_field: str, id_field: str) -> Iterator[Row]:
    """JSON Lines, or one JSON array (``json_array.py``): a row is a line, or an item."""

    def row(raw: bytes) -> Document | MessageError:
        try:
            doc = decode_message(raw, text_fields, max_bytes, time_field, id_field, also)
        except MessageError as exc:
            return exc
        # its keys are in the line already; a number sent as text grows by 2 bytes
        return _as_sent(doc, len(raw), max_bytes, _keys_bound(()))

    if is_array(path):
        with path.open("rb") as fh:
            for index, item in array_items(fh, path, max_bytes):
                yield index, item if isinstance(item, MessageError) else row(item)
        return
    with path.open("rb") as fh:
        index = -1
        while True:
            line = fh.readline(max_bytes + 2)  # the row, its newline, and one byte more
            if not line:
                return
            index += 1
            if len(line.rstrip(b"\r\n")) > max_bytes:
                size = len(line) + (0 if line.endswith(b"\n") else _skip_line(fh))
                yield index, MessageError("oversized", f"{size} bytes > limit {max_bytes}")
                continue
            line = line.strip()
            if line:
                yield index, row(line)


def _read_parquet(path: Path, text_fields: tuple[str, ...], also: tuple[str, ...],
                  max_bytes: int, time_field: str, id_field: str) -> Iterator[Row]:
    """The extra, the file and its columns checked now, as a TSV's header is (a generator
    checked them at the first row, after ``check`` had emptied an existing ``--out``)."""
    pq = require("pyarrow.parquet", "reading a Parquet dump")
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid and friends, for a file that is not one
        raise InputError(f"{path} is not a Parquet file: {exc}") from None
    columns = parquet.schema_arrow.names
    if not {*text_fields, *also} & set(columns):
        raise InputError(f"{path}: no column is one of the text fields "
                         f"{', '.join((*text_fields, *also))} (columns: "
                         f"{', '.join(columns[:10])})")
    if id_field != "id" and id_field not in columns:
        raise InputError(f"{path}: no column {id_field!r} to read the ids from (--id-field; "
                         f"columns: {', '.join(columns[:10])})")
    return _parquet_rows(parquet, text_fields, also, max_bytes, time_field, id_field)


def _parquet_rows(parquet: Any, text_fields: tuple[str, ...], also: tuple[str, ...],
                  max_bytes: int, time_field: str, id_field: str) -> Iterator[Row]:
    pa = require("pyarrow", "reading a Parquet dump")
    index = 0
    for batch in parquet.iter_batches(batch_size=1024):
        # Python datetimes stop at microseconds: nanosecond timestamps are cut there first.
        batch = pa.RecordBatch.from_arrays(
            [c.cast(pa.timestamp("us", c.type.tz), safe=False)
             if pa.types.is_timestamp(c.type) and c.type.unit == "ns" else c
             for c in batch.columns], schema=None, names=batch.schema.names)
        try:
            rows = batch.to_pylist()
        except (OverflowError, ValueError):  # a value Python cannot hold (a year after 9999)
            rows = _rows_one_value_at_a_time(batch, pa)
        for values in rows:
            yield index, _parquet_row(values, text_fields, also, max_bytes, time_field,
                                      id_field)
            index += 1


def _rows_one_value_at_a_time(batch: Any, pa: Any) -> list[dict[str, Any]]:
    """A batch's rows where a value that has no Python form is Arrow's text of it
    ("10000-01-01 00:00:00.000000"): one such cell in a column nobody reads stopped the
    whole read (a traceback, or 500 rows lost); in the time field it is a ``bad_time`` row,
    as a JSONL time of 1e300 is."""
    columns: list[list[Any]] = []
    for column in batch.columns:
        values = []
        for i in range(len(column)):
            try:
                values.append(column[i].as_py())
            except (OverflowError, ValueError):
                try:
                    values.append(column.slice(i, 1).cast(pa.string())[0].as_py())
                except pa.ArrowException:  # a nested value (left out of a row anyway)
                    values.append(None)
        columns.append(values)
    names = batch.schema.names
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _parquet_row(values: dict[str, Any], text_fields: tuple[str, ...], also: tuple[str, ...],
                 max_bytes: int, time_field: str, id_field: str) -> Document | MessageError:
    obj = {name: value if name in text_fields or name == id_field else _as_text(value)
           for name, value in values.items() if value is not None}
    binary = next((n for n in (*text_fields, id_field) if isinstance(obj.get(n), bytes)), None)
    if binary is not None:  # it said "must be a string, got JSON value"
        return MessageError("wrong_type", f"{binary} is a binary column: write it as a "
                                          "string column (UTF-8 text)")
    if isinstance(obj.get(id_field), float) and obj[id_field].is_integer():
        obj[id_field] = int(obj[id_field])  # an integer column with nulls, as pandas writes
    elif isinstance(obj.get(id_field), str) and not obj[id_field].strip():
        del obj[id_field]  # a blank cell, as a TSV's or a null (it was a wrong_type row)
    size = sum(len(v.encode("utf-8", "surrogatepass")) for v in obj.values()
               if isinstance(v, str))
    if size > max_bytes:
        return MessageError("oversized", f"{size} bytes > limit {max_bytes}")
    try:
        return _as_sent(document_from_object(obj, text_fields, time_field, id_field, also),
                        size, max_bytes, _keys_bound(obj))
    except MessageError as exc:
        return exc


def _as_text(value: Any) -> Any:
    """A non-text column's value as a string field (nested values are left out, as JSONL's)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bool | int | float):
        return str(value)
    return value


def _skip_line(fh: BinaryIO) -> int:
    """Read past the rest of an overlong line in 1 MiB pieces; the bytes skipped."""
    skipped = 0
    while True:
        piece = fh.readline(1 << 20)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
