"""A dump that is one JSON array of announcements, read item by item.

Scrapy's feed export writes ``-o items.json`` as one array (an item a line, then ``,``), and
so do many other exports; JSON Lines is ``-o items.jsonl``. A scraper's history saved the first
way was read as JSON Lines: its first line, ``[``, a ``malformed_json`` row, and each item a
bad row for its trailing comma. Here each item is cut out of the array with the standard
library's scanner (``raw_decode``), a megabyte at a time, so a dump of any size is read in
bounded memory; the caller then reads each item's bytes as it reads a JSON line.

A syntax error inside the array leaves no way to tell where the next item starts, so it ends
the reading with an ``InputError`` naming the item and the character (bytes not UTF-8: the
byte); an item over the size limit is a row of its own (``oversized``), as an overlong JSON
line is, though it is held whole to find its end (up to ``ITEM_CAP``; each retry reads as
much again as it holds, so an item is scanned a few times, not once a megabyte: 48 MB of
small values took 52 s that way, 53 MB now 0.55 s).

A file that starts with ``[`` is JSON Lines all the same when its first line is a whole
value and more follows (a first row that is an array, a bad row of such a file).
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
    """Whether the file is one JSON array: its first character (past a byte order mark and
    whitespace) is ``[``, and its first line is not a whole value with more lines after it."""
    with path.open("rb") as fh:
        head = fh.read(1 << 16).removeprefix(b"\xef\xbb\xbf").lstrip(_WHITESPACE.encode())
    if not head.startswith(b"["):
        return False
    first, newline, rest = head.partition(b"\n")
    if not newline or not rest.strip():
        return True  # one line (or the first 64 KB of one): an array written compactly
    try:
        json.loads(first)
    except ValueError:
        return True  # "[" alone, or an array's first line
    return False


def array_items(fh: BinaryIO, path: Path, max_bytes: int
                ) -> Iterator[tuple[int, bytes | MessageError]]:
    """(index, the item's UTF-8 bytes, or an ``oversized`` error) for each item in order."""
    reader = _Reader(fh, path)
    reader.expect("[")
    index = 0
    while reader.peek() != "]":
        if index:
            reader.expect(",", f"after item {index - 1}")
        raw = reader.item(index).encode("utf-8")
        yield index, (raw if len(raw) <= max_bytes else
                      MessageError("oversized", f"{len(raw)} bytes > limit {max_bytes}"))
        index += 1
    reader.pos += 1
    reader.end()


class _Reader:
    """The text of the file read so far from the current position on, refilled as needed."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path = fh, path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text, self.pos, self.done, self.offset = "", 0, False, 0  # offset: of text[0]
        self.read = 0  # bytes

    def more(self, size: int = 0) -> bool:
        """Read another piece, ``size`` characters or ``CHUNK``; False at the end."""
        if self.done:
            return False
        first = not self.read
        raw = self.fh.read(max(size, CHUNK, 3 * first))
        eof = not raw
        if first and raw.startswith(b"\xef\xbb\xbf"):  # a byte order mark
            raw, self.read = raw[3:], 3
        held = len(self.decoder.getstate()[0])  # the start of a character cut last time
        try:
            piece = self.decoder.decode(raw, final=eof)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.path} is not UTF-8 at byte "
                             f"{self.read - held + exc.start:,}: {exc.reason}") from None
        self.read += len(raw)
        self.text += piece
        self.done = eof
        return not eof

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file). Between
        items, what was read past is let go (not in ``more``: an item's scan holds places
        in the text)."""
        if self.pos > CHUNK:
            self.offset += self.pos
            self.text, self.pos = self.text[self.pos:], 0
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
            held = len(self.text) - self.pos
            try:
                _, end = _SCAN(self.text, self.pos)
                # A number may go on past the piece's end: "12|345", "0.|5", "1e|+5".
                if self.text[self.pos] in "-0123456789" and end >= len(self.text) - 2 and \
                        self.more(held):
                    continue
            except json.JSONDecodeError as exc:
                # Cut off by the piece's end ("tr|ue", "\\u00|e9", a string not closed yet)?
                cut = exc.pos >= len(self.text) - 16 or exc.msg.startswith("Unterminated")
                if cut and held > ITEM_CAP:
                    raise InputError(f"{self.path}: item {index} is over {ITEM_CAP >> 20} MiB "
                                     "(or not JSON): the rest of the array cannot be read"
                                     ) from None
                if cut and self.more(held):  # as much again: a few scans of a large item
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
