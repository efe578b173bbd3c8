"""A dump read and sketched one batch ahead, in a second process (what ``check`` runs on).

Why: on fresh ads, reading a dump and sketching it (normalize, shingle, sign) was ~40 % of
``check`` and the detector with its store the rest (50,000 generated ads: 1.9 s reading,
9.1 s sketching, 17.1 s judging). The two meet only in the sketches, so on two cores they
overlap: a child process reads rows, decodes them and sketches each batch; the parent judges
batch i while the child prepares batch i + 1. Verdicts are the same byte for byte: a sketch
is a function of the text alone (tested).

The child signs every set it has not signed before. A set the parent's store already held
(an exact copy) is signed for nothing, in the child's time; one the child signed earlier
and the store no longer holds (evicted by retention) is signed by the detector itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import multiprocessing as mp
import signal
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from streamdedup import heap
from streamdedup.core.document import Document
from streamdedup.core.sketch import Packed, Sketcher, Sketches, pack, unpack
from streamdedup.errors import InputError, MessageError, StreamdedupError
from streamdedup.replay import dump
from streamdedup.replay.config import BATCH
from streamdedup.replay.dump import Row, batched, read_dump
from streamdedup.settings import Settings

_END = "end"

Batch = tuple[list[Row], Sketches]


class ReadAhead:
    """Batches of ``batch`` rows as ``read_dump`` gives them, each with the sketches of its
    documents (``Detector.process_many``'s ``sketches``). The child starts here, before the
    caller opens its store (so it holds none of the store's files or locks); errors reading
    the dump are raised while iterating, as ``read_dump`` raises them, and a child that dies
    is an error too. ``close()`` stops the child.

    A pipe, not a queue: its write end lives in the child alone, so a child that dies (even
    halfway through a batch) is an end of file here, never a wait forever; its read end in
    the parent alone (the child closes the copy the fork gave it), so a parent that dies,
    even by SIGKILL, ends the child at its next send; and the child stays about one batch
    ahead, blocked on the pipe until the parent reads."""

    def __init__(self, path: Path, fmt: str | None, settings: Settings, batch: int = BATCH
                 ) -> None:
        self.path = path
        ctx = mp.get_context("fork")  # the child starts with the parent's imports
        self._reader, writer = ctx.Pipe(duplex=False)
        with contextlib.suppress(OSError, AttributeError):  # Linux: 1 MB, not 64 KB, per
            fcntl.fcntl(writer.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)  # switch of process
        self._child = ctx.Process(target=_produce,
                                  args=(self._reader, writer, path, fmt, settings, batch),
                                  daemon=True, name="streamdedup-read-ahead")
        self._child.start()
        writer.close()

    def __iter__(self) -> Iterator[Batch]:
        while True:
            try:
                item = self._reader.recv()
            except EOFError:
                self._child.join()
                raise InputError(f"the process reading {self.path} stopped (exit code "
                                 f"{self._child.exitcode}) before the end of the file"
                                 ) from None
            if isinstance(item, BaseException):
                raise item
            if item == _END:
                return
            yield _unpacked(item)

    def close(self) -> None:
        if self._child.is_alive():
            self._child.kill()
        self._child.join()
        self._reader.close()


def _produce(inherited: Connection, out: Connection, path: Path, fmt: str | None,
             settings: Settings, batch: int) -> None:
    inherited.close()  # or a full pipe would wait forever for a parent long dead
    # Ctrl-C reaches the whole process group, and so does a supervisor's SIGTERM (`timeout`,
    # systemd's control group): the parent stops and closes this child, whose traceback
    # (KeyboardInterrupt, from the parent's SIGTERM handler the fork copied) came out beside
    # the parent's one line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    heap.hold()  # a batch's arrays reuse the last one's pages (``streamdedup/heap.py``)
    try:
        sketcher = Sketcher(settings)
        signed: set[int] = set()
        # The parent reads the same header and says its warnings (a missing column): twice
        # was noise. The rows' own (quotes read as characters) are this child's to say.
        said = logging.getLogger(dump.__name__)
        level = said.level
        said.setLevel(logging.ERROR)
        try:
            rows_read = read_dump(path, fmt, settings.text_fields,
                                  max_bytes=settings.max_message_bytes,
                                  time_field=settings.read_time_field,
                                  id_field=settings.id_field)
        finally:
            said.setLevel(level)
        for rows in batched(rows_read, batch):
            out.send(_packed(rows, sketcher, signed))
        out.send(_END)
    except StreamdedupError as exc:
        out.send(exc)
    except BrokenPipeError:  # the parent stopped reading (it failed or was interrupted)
        pass
    except Exception as exc:  # anything else: said, not lost in the child
        out.send(InputError(f"reading {path} failed: {type(exc).__name__}: {exc}"))
    finally:
        out.close()


# What crosses the pipe per batch: the rows with their documents' fields left out (the
# detector reads a document's id and time; the sketches carry its text) and the sketches
# packed (``core/sketch.py``). Unpickling a batch of 500 generated ads took 7.5 ms as
# objects, ~2 ms like this.
def _packed(rows: list[Row], sketcher: Sketcher, signed: set[int]
            ) -> tuple[list[Row], Packed]:
    docs = [item for _, item in rows if not isinstance(item, MessageError)]
    slim = [(i, item if isinstance(item, MessageError) else Document(item.id, {}, item.time))
            for i, item in rows]
    return slim, pack(sketcher.sketches([d.fields for d in docs], signed))


def _unpacked(item: tuple[list[Row], Packed]) -> Batch:
    return item[0], unpack(item[1])
