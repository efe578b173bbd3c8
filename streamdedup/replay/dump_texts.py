"""The texts of some ids in a dump, read once through: what ``explain --dump`` and the
monitor's ``--dump`` show for an ad that was backfilled, not streamed (the store keeps shingle
hashes or a normalized text, never the ad as sent, and the input topic never held it).

A scan, not an index: the Kijiji dump (3,127 ads) reads in 0.03 s, 50,000 generated ads
in 0.4 s (medians of 5 runs); an index of a dump's ids would have to be kept true to the file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from streamdedup.core.document import Document
from streamdedup.replay.dump import read_dump
from streamdedup.settings import Settings


@dataclass
class DumpTexts:
    """Every text of each id asked for, with its row (0-based, as ``--errors`` and a TSV's
    row-number ids count them), in file order; and how many rows were read, and why those
    that could not be were not."""

    found: dict[str, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    rows: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def unread(self) -> str:
        """The rows that could not be read, as a parenthesis ("" when none): a dump read in
        the wrong format had every row a bad one, and said only that the id was not there."""
        bad = self.reasons.total()
        if not bad:
            return ""
        return (f" ({bad:,} of its {self.rows:,} rows could not be read: "
                f"{', '.join(f'{n:,} {r}' for r, n in sorted(self.reasons.items()))}"
                f"{'; is --format right?' if bad == self.rows else ''})")


def dump_texts(path: Path, fmt: str | None, settings: Settings, ids: Collection[str]
               ) -> DumpTexts:
    """The texts of ``ids`` in the dump at ``path``, each id read as ``check`` reads it
    (``--id-field``, row numbers in a TSV without an id column)."""
    texts = DumpTexts()
    for row, item in read_dump(path, fmt, settings.text_fields,
                               max_bytes=settings.max_message_bytes, id_field=settings.id_field):
        texts.rows += 1
        if not isinstance(item, Document):
            texts.reasons[item.reason] += 1
        elif item.id in ids:
            texts.found.setdefault(item.id, []).append((row, dict(item.fields)))
    return texts
