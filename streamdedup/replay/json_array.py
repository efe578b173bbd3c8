"""A dump that is one JSON array of announcements, read item by item.

Scrapy's feed export writes ``-o items.json`` as one array (an item a line, then ``,``), and
so do many other exports; JSON Lines is ``-o items.jsonl``. A scraper's history saved the first
way was read as JSON Lines: its first line, ``[``, a ``malformed_json`` row, and each item a
bad row for its trailing comma. Here each item is cut out of the array with the standard
library's scanner (``raw_decode``), a megabyte at a time, so a dump of any size is read in
bounded memory; the caller then reads each item's bytes as it reads a JSON line.

A syntax error inside the array leaves no way to tell where the next item starts, so it ends
the reading with an ``InputError`` naming the item and the byte; an item over the size limit
is a row of its own (``oversized``), as an overlong JSON line is.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from streamdedup.errors import InputError, MessageError

CHUNK = 1 << 20  # characters read at a time
ITEM_CAP = 64 << 20  # an item larger than this ends the reading: it is held whole to be cut
_WHITESPACE = " \t\r\n"
# The scanner only finds where an item ends: every number and constant taken as its text's
# length (no 4,300-digit limit, no float), read for real by the caller.
_SCAN = json.JSONDecoder(parse_int=len, parse_float=len, parse_constant=len).raw_decode


def is_array(path: Path) -> bool:
    """Whether the file's first character (past a byte order mark and whitespace) is ``[``."""
    with path.open("rb") as fh:
        head = fh.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip(_WHITESPACE.encode())
    return head.startswith(b"[")


def array_items(fh: BinaryIO, path: Path, max_bytes: int
                ) -> Iterator[tuple[int, bytes | MessageError]]:
    """(index, the item's UTF-8 bytes, or an ``oversized`` error) for each item in order."""
    reader = _Reader(fh, path)
    reader.expect("[")
    index = 0
    if reader.peek() == "]":
        reader.pos += 1
        reader.end()
        return
    while True:
        item = reader.item(index)
        size = len(item.encode("utf-8"))
        yield index, (item.encode("utf-8") if size <= max_bytes else
                      MessageError("oversized", f"{size} bytes > limit {max_bytes}"))
        index += 1
        if reader.peek() == "]":
            reader.pos += 1
            reader.end()
            return
        reader.expect(",", f"after item {index - 1}")


class _Reader:
    """The text of the file read so far from the current position on, refilled as needed."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path = fh, path
        self.decode = codecs.getincrementaldecoder("utf-8-sig")().decode
        self.text, self.pos, self.done, self.offset = "", 0, False, 0  # offset: of text[0]

    def more(self) -> bool:
        """Read another piece; False at the end of the file."""
        if self.done:
            return False
        raw = self.fh.read(CHUNK)
        try:
            piece = self.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.path} is not UTF-8 near character "
                             f"{self.offset + len(self.text):,}: {exc.reason}") from None
        if self.pos > CHUNK:  # what was read past is let go
            self.offset += self.pos
            self.text, self.pos = self.text[self.pos:], 0
        self.text += piece
        self.done = not raw
        return bool(raw)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text) or not self.more():
                return self.text[self.pos:self.pos + 1]

    def expect(self, char: str, where: str = "at the start") -> None:
        found = self.peek()
        if found != char:
            raise InputError(f"{self.path}: a JSON array dump wants {char!r} {where}, found "
                             f"{found or 'the end of the file'!r} at character "
                             f"{self.offset + self.pos:,}"
                             + ("; a JSON Lines file (one object a line) is read as one if "
                                "it does not start with '['" if char == "[" else ""))
        self.pos += 1

    def item(self, index: int) -> str:
        """The next item's text, read whole."""
        self.peek()
        while True:
            try:
                _, end = _SCAN(self.text, self.pos)
            except json.JSONDecodeError as exc:
                # Cut off by the piece's end ("tr|ue", "\\u00|e9", a string not closed yet)?
                cut = exc.pos >= len(self.text) - 16 or exc.msg.startswith("Unterminated")
                if cut and len(self.text) - self.pos > ITEM_CAP:
                    raise InputError(f"{self.path}: item {index} is over {ITEM_CAP >> 20} MiB "
                                     "(or not JSON): the rest of the array cannot be read"
                                     ) from None
                if cut and self.more():
                    continue
                raise InputError(f"{self.path}: item {index} is not JSON ({exc.msg} at "
                                 f"character {self.offset + exc.pos:,}): the rest of the "
                                 "array cannot be read") from None
            item, self.pos = self.text[self.pos:end], end
            return item

    def end(self) -> None:
        found = self.peek()
        if found:
            raise InputError(f"{self.path}: more follows the JSON array's end (at character "
                             f"{self.offset + self.pos:,}): one array, or JSON Lines")
