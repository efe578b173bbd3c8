"""A dump that is one JSON array (Scrapy's ``-o items.json``): read item by item, as the
same announcements in JSON Lines are, whatever the pieces it is read in."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.document import Document
from streamdedup.errors import InputError
from streamdedup.replay import json_array
from streamdedup.replay.dump import read_dump

FIELDS = ("title", "description")
ITEMS = [{"url": "https://x/ad/1", "title": "Cuoco", "description": "Cercasi cuoco, turni"},
         {"url": "https://x/ad/2", "title": "Cameriere",
          "description": "Sala e bar \u00e9 \U0001f600", "pay": 12.5, "tags": ["a", "b"],
          "remote": False, "extra": None},
         {"url": "https://x/ad/3", "title": "Autista", "description": ["list", "of", "text"]},
         {"url": "https://x/ad/4", "title": "Barista", "description": "Caff\\u00e8"}]


def rows(path: Path, **kwargs: Any) -> list[tuple[int, Any]]:
    return [(i, d.id if isinstance(d, Document) else d.reason)
            for i, d in read_dump(path, None, FIELDS, id_field="url", **kwargs)]


def test_scrapys_json_feed_reads_as_its_json_lines_feed(tmp_path: Path) -> None:
    """Written by Scrapy's own exporters: `-o items.json` was read as JSON Lines, every row a
    bad one ('[' malformed, each item's trailing comma)."""
    from scrapy.exporters import JsonItemExporter, JsonLinesItemExporter

    for name, exporter in (("items.json", JsonItemExporter), ("items.jsonl",
                                                              JsonLinesItemExporter)):
        with (tmp_path / name).open("wb") as fh:
            writer = exporter(fh)
            writer.start_exporting()
            for item in ITEMS:
                writer.export_item(item)
            writer.finish_exporting()
    assert (tmp_path / "items.json").read_bytes().startswith(b"[")
    expected = [(0, "https://x/ad/1"), (1, "https://x/ad/2"), (2, "wrong_type"),
                (3, "https://x/ad/4")]
    assert rows(tmp_path / "items.json") == rows(tmp_path / "items.jsonl") == expected
    docs = {d.id: d for _, d in read_dump(tmp_path / "items.json", None, FIELDS,
                                          id_field="url") if isinstance(d, Document)}
    assert docs["https://x/ad/2"].fields["description"] == "Sala e bar \u00e9 \U0001f600"
    assert docs["https://x/ad/2"].fields["pay"] == "12.5"


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.recursive(  # items of any kind: a number may end where a piece does
           st.none() | st.booleans() | st.integers() | st.text(max_size=20)
           | st.floats(allow_nan=False, allow_infinity=False),
           lambda inner: st.lists(inner, max_size=3)
           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10),
           max_size=6),
       chunk=st.integers(1, 40), indent=st.sampled_from([None, 2]),
       ascii_only=st.booleans())
def test_every_item_is_cut_whole_whatever_the_pieces(items: list[Any], chunk: int,
                                                     indent: int | None,
                                                     ascii_only: bool) -> None:
    """Pieces as small as one byte: a piece's end falls inside strings, escapes, numbers,
    ``true`` and multi-byte characters."""
    data = json.dumps(items, indent=indent, ensure_ascii=ascii_only).encode("utf-8")
    original = json_array.CHUNK
    json_array.CHUNK = chunk
    try:
        got = list(json_array.array_items(io.BytesIO(data), Path("x.json"), 1 << 20))
    finally:
        json_array.CHUNK = original
    assert [i for i, _ in got] == list(range(len(items)))
    assert [json.loads(raw) for _, raw in got] == items  # type: ignore[arg-type]


def test_an_oversized_item_is_a_row_and_the_rest_is_read(tmp_path: Path) -> None:
    dump = tmp_path / "ads.json"
    big = {"url": "https://x/big", "description": "parola " * 2000}
    dump.write_text(json.dumps([ITEMS[0], big, ITEMS[3]]), encoding="utf-8")
    assert rows(dump, max_bytes=5000) == [(0, "https://x/ad/1"), (1, "oversized"),
                                          (2, "https://x/ad/4")]


@pytest.mark.parametrize(("text", "said"), [
    ('[{"title": "a"}, {"title": "b" "c"}]', "item 1 is not JSON (Expecting ',' delimiter"),
    ('[{"title": "a"} {"title": "b"}]', "wants ',' after item 0, found '{'"),
    ('[{"title": "a"},', "item 1 is not JSON (Expecting value"),
    ('[{"title": "a"}] {"title": "b"}', "more follows the JSON array's end"),
    ('[{"title": "a"}', "wants ',' after item 0, found 'the end of the file'"),
    ('[{"title": "unclosed}]', "item 0 is not JSON (Unterminated string"),
])
def test_a_broken_array_ends_the_reading_naming_the_item(tmp_path: Path, text: str,
                                                         said: str) -> None:
    """After a syntax error there is no telling where the next item starts."""
    dump = tmp_path / "ads.json"
    dump.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(said)):
        rows(dump)


def test_an_empty_array_a_byte_order_mark_and_whitespace(tmp_path: Path) -> None:
    dump = tmp_path / "ads.json"
    dump.write_bytes(b" \n [ \n ] \n")
    assert rows(dump) == []
    dump.write_bytes(b"\xef\xbb\xbf" + json.dumps(ITEMS[:1]).encode())
    assert rows(dump) == [(0, "https://x/ad/1")]


def test_bytes_that_are_not_utf8_end_the_reading_naming_the_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It named the start of the piece being read ("near character 0" for byte 594,902)."""
    dump = tmp_path / "ads.json"
    head = b'\xef\xbb\xbf[{"title": "caff\xc3\xa8 ' + b"x" * 5000
    dump.write_bytes(head + b'\xe8"}]')
    monkeypatch.setattr(json_array, "CHUNK", 7)  # pieces that cut the two-byte \xc3\xa8 too
    with pytest.raises(InputError, match=f"is not UTF-8 at byte {len(head):,}:"):
        rows(dump)


def test_an_item_over_many_pieces_is_scanned_a_few_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each retry read one more piece and scanned the item again from its start: 48 MB of
    small values took 52 s. Now each reads as much again as it holds."""
    scans = []

    def counted(text: str, pos: int) -> Any:
        scans.append(pos)
        return scan(text, pos)

    scan = json_array._SCAN
    monkeypatch.setattr(json_array, "_SCAN", counted)
    monkeypatch.setattr(json_array, "CHUNK", 1024)
    item = json.dumps({"values": list(range(100_000))}).encode()  # 0.6 MB: 600 pieces
    got = list(json_array.array_items(io.BytesIO(b"[" + item + b"]"), Path("x.json"), 1 << 20))
    assert [raw for _, raw in got] == [item] and len(scans) < 15, len(scans)


def test_json_lines_are_still_read_line_by_line(tmp_path: Path) -> None:
    """Only a file that starts with '[' is an array; a JSON Lines file whose bad first row
    is an array stays JSON Lines when it does not start with one."""
    dump = tmp_path / "ads.json"
    dump.write_text(json.dumps(ITEMS[0]) + "\n[1, 2]\n" + json.dumps(ITEMS[3]) + "\n",
                    encoding="utf-8")
    assert rows(dump) == [(0, "https://x/ad/1"), (1, "not_an_object"), (2, "https://x/ad/4")]
    # Nor when its first row is the array: a whole value on the first line, more after it
    # (it was refused: "more follows the JSON array's end").
    dump.write_text("[1, 2]\n" + json.dumps(ITEMS[0]) + "\n", encoding="utf-8")
    assert rows(dump) == [(0, "not_an_object"), (1, "https://x/ad/1")]


def test_a_syntax_error_stops_the_reading_where_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not read on to the end of a large file (held in memory) to find it is still broken."""
    data = io.BytesIO(b'[{"title": "a" "b"}, ' + b'{"title": "c"}, ' * 10_000 + b"{}]")
    monkeypatch.setattr(json_array, "CHUNK", 64)
    with pytest.raises(InputError, match="item 0 is not JSON"):
        list(json_array.array_items(data, Path("x.json"), 1 << 20))
    assert data.tell() <= 64
