"""`streamdedup explain ID [OTHER_ID]`: two announcements side by side in the terminal, the
passages one has and the other has not highlighted, and why the detector did or did not call
them duplicates.

The store keeps shingle hashes or a normalized text, never the ad as sent, so the texts come
from a dump (``--dump``) or from the input topic (read from the beginning, without a group):
an id the dump lacks is looked for in the topic, for the usual pair after a backfill, a
streamed repost of a backfilled ad.
``OTHER_ID`` defaults to the document's ``duplicate_of``, taken from the store
(``--store``/Redis) or the verdict topic.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import KAFKA_CLIENT, failure, make_settings, settings_options
from streamdedup.errors import InputError, StreamdedupError
from streamdedup.replay.dump import FORMATS
from streamdedup.settings import Settings
from streamdedup.terminal import cells, printable, printable_json, writable

MARK, PLAIN = "\x1b[30;43m", "\x1b[0m"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@click.command(name="explain", short_help="Two announcements side by side, and why.")
@click.argument("doc_id")
@click.argument("other_id", required=False)
@click.option("--dump", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="read the texts from this dump (an id it lacks: from the "
              "input topic)")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="the dump's format [default: from its name]")
@click.option("--use-store", is_flag=True,
              help="take OTHER_ID from the document's stored verdict (--store, or Redis)")
@click.option("--color/--no-color", default=None, help="highlight [default: on a terminal]")
@click.option("--json", "as_json", is_flag=True, help="print the explanation as JSON")
@settings_options(shown=(*KAFKA_CLIENT, "input_topic", "output_topic", "max_message_bytes",
                         "max_output_bytes", "text", "sketch", "store"))
def explain_command(doc_id: str, other_id: str | None, dump: Path | None, fmt: str | None,
                    use_store: bool, color: bool | None, as_json: bool, preset: str | None,
                    **options: Any) -> None:
    """Two announcements side by side: what differs highlighted, exact Jaccard, MinHash
    estimate, bands shared, and why they were or were not a candidate pair. Without
    OTHER_ID: DOC_ID's duplicate_of, read from --output-topic (from the store with
    --use-store)."""
    import json

    from kafka.errors import KafkaError

    from streamdedup.core.explain import disagreement, explain
    from streamdedup.core.sketch import Sketcher

    settings = make_settings(preset, options, opens_store=use_store)
    for name, value in (("DOC_ID", doc_id), ("OTHER_ID", other_id)):
        if value is not None and not value.strip():  # no message has it: the whole topic
            raise click.UsageError(f"{name} is empty: give an ad's id")  # was read first
    if other_id == doc_id:  # it would be "a duplicate" of itself, which no verdict says
        raise click.UsageError(f"DOC_ID and OTHER_ID are both {doc_id!r}: give two ids")
    # flags that would do nothing were taken without a word
    if fmt is not None and dump is None:
        raise click.UsageError("--format is the format of --dump FILE: give the dump too "
                               "(without one the texts are read from --input-topic)")
    if use_store and other_id is not None:
        raise click.UsageError("--use-store takes OTHER_ID from DOC_ID's stored verdict: give "
                               "OTHER_ID or --use-store, not both")
    verdict: dict[str, Any] = {}
    try:
        if other_id is None:
            verdict = _verdict(settings, doc_id, use_store)
            if not verdict.get("duplicate_of"):
                raise InputError(f"{doc_id!r} is not a duplicate of anything: name OTHER_ID")
            other_id = str(verdict["duplicate_of"])
        versions = _texts(settings, {doc_id, other_id}, dump, fmt)
        texts, note = _as_judged(versions, doc_id, other_id)
        if note:
            click.echo(f"note: {note}", err=True)
        sketcher = Sketcher(settings)
        result = explain(sketcher, doc_id, texts[doc_id], other_id, texts[other_id])
        built = _built_otherwise(settings, sketcher.params()) if use_store else ""
    except StreamdedupError as exc:
        raise failure(exc) from None
    except KafkaError as exc:  # the topics were to be read, and the broker did not answer
        raise click.ClickException(f"cannot read from {settings.bootstrap_servers}: {exc}"
                                   ) from None
    said = [x for x in (built, disagreement(verdict, other_id, result)) if x]
    warning = (f"{'; '.join(said)}: give explain the detector's --preset, shingle "
               "settings and --normalizer-version" if said else "")
    if as_json:
        click.echo(printable_json(json.dumps(
            {**result.to_dict(), **({"warning": warning} if warning else {})},
            ensure_ascii=False, indent=2)))
        return
    use_color = sys.stdout.isatty() if color is None else color
    width = max(40, shutil.get_terminal_size((120, 20)).columns)
    for line in side_by_side(result.a.id, result.a.text, result.a.differs, result.b.id,
                             result.b.text, result.b.differs, width, use_color):
        click.echo(line, color=use_color)  # click strips colours off a pipe unless told
    click.echo("")
    if max(len(printable(result.a.id)), len(printable(result.b.id))) > (width - 3) // 2:
        click.echo(f"left {printable(result.a.id)}\nright {printable(result.b.id)}")
    click.echo(f"exact Jaccard {result.jaccard:.3f} (threshold {result.threshold}); MinHash "
               f"estimate {result.estimate:.3f}; {result.bands_shared} of {result.bands} bands "
               f"of {result.rows} rows shared; shingles {result.a.shingles} and "
               f"{result.b.shingles} (sizes {result.size_range[0]}..{result.size_range[1]} can "
               f"reach the threshold)")
    click.echo(result.reason)
    if warning:
        click.echo(f"warning: {warning}", err=True)


def _built_otherwise(settings: Settings, params: dict[str, Any]) -> str:
    """How the store's parameters differ from these settings' ("" when they do not): a
    store built at threshold 0.8 explained at 0.5 said "a duplicate" without a word, since
    the pair's Jaccard came out the same."""
    from streamdedup.store import read_params
    from streamdedup.store.base import param_differences

    stored = read_params(settings)
    differences = param_differences(stored, params) if stored else []
    return (f"the store was built with other parameters ({'; '.join(differences)})"
            if differences else "")


def _verdict(settings: Settings, doc_id: str, use_store: bool) -> dict[str, Any]:
    """The document's verdict, from the store or the verdict topic."""
    from streamdedup.core.verdict import Verdict

    verdict: dict[str, Any] | None = None
    if use_store:
        from streamdedup.store import read_verdict

        text = read_verdict(settings, doc_id)  # read-only, beside the consumers
        verdict = Verdict.from_json(text).to_dict() if text else None
    else:
        try:
            found = _scan(settings, settings.output_topic, {doc_id})
        except StreamdedupError as exc:  # no broker: a user of a store or a dump alone
            raise StreamdedupError(f"{exc}; or name OTHER_ID, or take it from the store with "
                                   "--use-store") from None
        verdict = found[doc_id][-1][1] if doc_id in found else None  # its last
    if verdict is None:
        raise InputError(f"no verdict for {doc_id!r} in "
                         f"{'the store' if use_store else settings.output_topic}")
    return verdict


def _as_judged(versions: dict[str, list[tuple[int, dict[str, str]]]], doc_id: str,
               other_id: str) -> tuple[dict[str, dict[str, str]], str]:
    """DOC_ID's last text, and OTHER_ID's as it was when that text was judged (its last one
    before it, else its first): an id sent again with another text is another version, and
    its last text compared with DOC_ID said "Jaccard 0.000" of a pair the detector had
    measured 1.000. Also a note when either id has several texts."""
    from streamdedup.monitor.state import as_of

    position, text = versions[doc_id][-1]
    chosen = {doc_id: text, other_id: as_of(versions[other_id], position)[1]}
    several = [f"{i!r} has {n} different texts" for i in (doc_id, other_id)
               if (n := len({json.dumps(f, sort_keys=True) for _, f in versions[i]})) > 1]
    note = (f"{' and '.join(several)}: explained with {doc_id!r}'s last and {other_id!r}'s as "
            f"it was when that one was judged" if several else "")
    return chosen, note


def _texts(settings: Settings, ids: set[str], dump: Path | None, fmt: str | None
           ) -> dict[str, list[tuple[int, dict[str, str]]]]:
    """Every text of each id, with its row in the dump or its record time in the topic,
    in that order."""
    from streamdedup.replay.dump_texts import DumpTexts, dump_texts

    read = DumpTexts() if dump is None else dump_texts(dump, fmt, settings, ids)
    found = read.found
    away = ""  # why the topic could not be read for what the dump lacks
    if ids - set(found):
        try:
            scanned = _scan(settings, settings.input_topic, ids - set(found))
        except StreamdedupError as exc:  # no broker: the texts are in a dump too
            if dump is None:
                raise StreamdedupError(f"{exc}; or read the texts from a dump with --dump "
                                       "FILE") from None
            away = str(exc).split(";")[0]  # the rest tells how to start a broker
        else:
            found.update({i: [(n, {k: writable(v) for k, v in body.items()
                                   if isinstance(v, str)}) for n, body in bodies]
                          for i, bodies in scanned.items()})
    missing = sorted(ids - set(found))
    if missing:
        unread = read.unread()
        if dump is None:
            where = (f"in topic {settings.input_topic} (an ad backfilled from a dump is not "
                     "there: give the dump too, --dump FILE)")
        elif away:
            where = (f"in {dump}{unread} (topic {settings.input_topic}, where a streamed ad "
                     f"would be, not read: {away})")
        else:
            where = f"neither in {dump}{unread} nor in topic {settings.input_topic}"
        # ids that are no row numbers, in a dump read by them: its ids are in a column
        by_number = dump is not None and settings.id_field == "id" and not any(
            m.isdigit() for m in missing)
        raise InputError(f"no announcement with id {', '.join(map(repr, missing))} {where}"
                         + ("; if the ids were read from a column (check --id-field), give "
                            "it here too" if by_number else ""))
    return found


_READS = 1 << 40  # more records than one reading of a topic holds


def _scan(settings: Settings, topic: str, ids: set[str]
          ) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The records of each id in ``topic`` with their record time (ms, then read), oldest first,
    reading it once from the beginning. Time, not the order of reading: partitions are read
    one after another, and an id's later text on partition 0 came before a document on
    partition 1 that had been judged against its earlier one ("Jaccard 0.000" of a pair the
    detector measured 1.000); the monitor orders versions by time too."""
    from streamdedup.monitor.observer import BEGINNING, Observer, decode
    from streamdedup.service.kafka import ensure_broker
    from streamdedup.service.message import announcement_id

    ensure_broker(settings)
    observer = Observer(settings, [topic], BEGINNING, client_id="streamdedup-explain")
    try:
        observer.refresh()
        if not observer.assigned:  # it said "no verdict for X in T", as if T were read
            raise InputError(f"topic {topic} is not on {settings.bootstrap_servers} (is "
                             f"{settings.topic_flag(topic)} the detector's?)")
        ends = observer.consumer.end_offsets(sorted(observer.assigned))
        found: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        read = 0
        while any(observer.consumer.position(tp) < end for tp, end in ends.items()):
            for _, rec in observer.poll(1000):
                read += 1
                body = decode(rec, announcement=topic == settings.input_topic)
                if topic == settings.input_topic:
                    doc_id = announcement_id(body, settings.id_field)
                else:
                    doc_id = None if body is None else str(body.get("id"))
                if body is not None and doc_id in ids:
                    # Time first, then the order of reading: records of one millisecond (a
                    # fast producer; one batch under LogAppendTime; -1, none) keep their
                    # partition's order, where time alone took o's later text for d again.
                    when = int(rec.timestamp) * _READS + read
                    found.setdefault(str(doc_id), []).append((when, body))
        for records in found.values():
            records.sort(key=lambda record: record[0])
        return found
    finally:
        observer.close()


def side_by_side(a_id: str, a: str, a_marks: Sequence[tuple[int, int]], b_id: str, b: str,
                 b_marks: Sequence[tuple[int, int]], width: int, color: bool) -> list[str]:
    """Two texts in two columns, wrapped at spaces; the marked spans (what differs) in
    reverse colours (or, with no colour, in [brackets])."""
    col = (width - 3) // 2
    left = _wrap(a, a_marks, col, color)
    right = _wrap(b, b_marks, col, color)
    a_id, b_id = _fit(printable(a_id), col), _fit(printable(b_id), col)
    head = [f"{a_id:<{col}} | {b_id}", f"{'-' * col}-+-{'-' * col}"]
    rows = []
    for i in range(max(len(left), len(right))):
        lt, lv = left[i] if i < len(left) else ("", 0)
        rt, _ = right[i] if i < len(right) else ("", 0)
        rows.append(f"{lt}{' ' * max(0, col - lv)} | {rt}".rstrip())
    return head + rows


def _fit(shown_id: str, col: int) -> str:
    """An id in ``col`` characters, cut in its middle: two links of one site cut at their
    end showed the same 57 characters, and which ad was which could not be told."""
    if len(shown_id) <= col:
        return shown_id
    head = max(1, (col - 1) // 3)
    return shown_id[:head] + "…" + shown_id[len(shown_id) - (col - 1 - head):]


def _wrap(text: str, marks: Sequence[tuple[int, int]], col: int, color: bool
          ) -> list[tuple[str, int]]:
    """Lines of at most ``col`` terminal columns, each with its width. Each character is
    shown as ``printable`` shows it; the marks still count the text's own characters."""
    shown = [printable(ch) for ch in text]
    marked = [False] * len(text)
    for x, y in marks:
        for i in range(x, min(y, len(text))):
            marked[i] = True
    lines: list[tuple[str, int]] = []
    start = 0
    while start < len(text):
        end, used = start, 0
        while end < len(text) and used + cells(shown[end]) <= col:
            used += cells(shown[end])
            end += 1
        end = max(end, start + 1)  # a character wider than the column still goes
        if end < len(text) and " " in text[start:end]:
            end = text.rindex(" ", start, end) + 1
        lines.append(_paint(shown, marked, start, end, color))
        start = end
    return lines


def _paint(shown: list[str], marked: list[bool], start: int, end: int, color: bool
           ) -> tuple[str, int]:
    out, inside = [], False
    for i in range(start, end):
        if marked[i] != inside:
            inside = marked[i]
            out.append((MARK if inside else PLAIN) if color else ("[" if inside else "]"))
        out.append(shown[i])
    if inside:
        out.append(PLAIN if color else "]")
    line = "".join(out).rstrip()
    return line, cells(_ANSI.sub("", line))
