"""Output files named on the command line (``--out``, ``--errors``): checked before any work.

Why: ``check dump.jsonl --out dump.jsonl`` truncated the dump it was reading and exited 0
with 32 of 600 documents judged, and an ``--out`` in a directory that does not exist ended a
run in a traceback after the store was opened. Both are now one line, before anything is
read or written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import click


def checked_output(out: Path, *inputs: Path | None, option: str = "--out") -> Path:
    """``out`` if it can be created and is none of ``inputs``; else a UsageError (exit 2)."""
    for source in inputs:
        if source is not None and _same_file(out, source):
            raise click.UsageError(f"{option} {out} is the input {source}: writing it would "
                                   f"destroy what is being read; give another file")
    try:
        if out.is_dir():
            raise click.UsageError(f"{option} {out} is a directory; give a file")
        if not out.parent.is_dir():
            raise click.UsageError(f"{option} {out}: no directory {out.parent} to write it in")
    except OSError as exc:  # a name too long, a loop of links
        raise click.UsageError(f"{option} {out}: {exc.strerror or exc}") from None
    return out


def open_output(out: Path, *inputs: Path | None, option: str = "--out") -> TextIO:
    """``out`` checked (``checked_output``) and opened for writing; a refusal by the file
    system (permissions, a full disk) is one line too."""
    checked_output(out, *inputs, option=option)
    try:
        return out.open("w", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {option} {out}: "
                                   f"{exc.strerror or exc}") from None


def _same_file(a: Path, b: Path) -> bool:
    """The same file, also through another spelling of its path or a link."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return a.resolve() == b.resolve()
