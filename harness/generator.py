"""A seeded generator of realistic Italian job ads, with a controlled share of reposts.

Why: the Kijiji dump has 3,127 ads, too few to measure how the detector grows to a million,
and it may not be redistributed. The generator learns word statistics from the dump at run
time (a path given by the caller; nothing from it is stored in the project) and then writes
as many ads as asked, deterministically from a seed.

What it learns, from the *distinct* descriptions and titles (so one boilerplate text repeated
1,626 times does not dominate): a first-order word chain (word -> next words, with their
counts), the words that start a line, the distribution of lines per ad and words per line,
title lengths, and locations. An original ad is a title and lines walked from the chains,
plus, as real ads have, some salary, phone, date and legal boilerplate lines.

A repost (share ``dup_share`` of the stream) copies an earlier original under a new id, link
and timestamp. A share ``exact_share`` of reposts keep the text as it was (exact reposts);
the others get one to three edits: salary, phone or dates changed, lines reordered,
boilerplate added, or typos. Each ad says what it is in ``repost_of`` (the original's id,
or "") and ``edits`` (comma-separated edit kinds, "" for an original or an exact repost).

Usage: ``python -m harness.generator DUMP.tsv --count 10000 --seed 7 --out ads.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import IO

from harness import edits
from harness.edits import SCRAPER_EDITS
from streamdedup.errors import MessageError
from streamdedup.replay.dump import read_dump
from streamdedup.settings import Settings

EDIT_KINDS = tuple(SCRAPER_EDITS)


@dataclass(frozen=True)
class _Chain:
    """First-order word chain: next words repeated by count, so a draw is one index."""

    starts: tuple[str, ...]
    nexts: dict[str, tuple[str, ...]]

    def walk(self, rng: random.Random, length: int) -> list[str]:
        word = self.starts[int(rng.random() * len(self.starts))]
        out = [word]
        nexts = self.nexts
        while len(out) < length:
            pool = nexts.get(word)
            if not pool:  # a word seen only at line ends: start a new clause
                pool = self.starts
            word = pool[int(rng.random() * len(pool))]
            out.append(word)
        return out


def _chain(lines: Sequence[list[str]]) -> _Chain:
    starts: list[str] = []
    counts: dict[str, Counter[str]] = {}
    for words in lines:
        if not words:
            continue
        starts.append(words[0])
        for a, b in pairwise(words):
            counts.setdefault(a, Counter())[b] += 1
    nexts = {
        a: tuple(w for w, n in sorted(c.items()) for _ in range(n)) for a, c in counts.items()
    }
    return _Chain(tuple(starts), nexts)


@dataclass(frozen=True)
class AdModel:
    """Statistics learned from a dump; deterministic given the file."""

    body: _Chain
    title: _Chain
    lines_per_ad: tuple[int, ...]
    words_per_line: tuple[int, ...]
    words_per_title: tuple[int, ...]
    locations: tuple[str, ...]
    source_ads: int
    distinct_descriptions: int


def learn(path: str | Path) -> AdModel:
    """Learn word and line statistics from a Kijiji-style TSV (title, description, location)."""
    seen: set[str] = set()
    seen_titles: set[str] = set()
    body_lines: list[list[str]] = []
    title_lines: list[list[str]] = []
    lines_per_ad: list[int] = []
    words_per_line: list[int] = []
    words_per_title: list[int] = []
    locations: list[str] = []
    rows = 0
    for _, doc in read_dump(path, "tsv", Settings.text_fields):
        if isinstance(doc, MessageError):
            continue
        rows += 1
        row = doc.fields
        desc = (row.get("description") or "").strip()
        title = (row.get("title") or "").strip()
        if row.get("location"):
            locations.append(row["location"].strip())
        if title and title not in seen_titles:
            seen_titles.add(title)
            title_lines.append(title.split())
            words_per_title.append(len(title_lines[-1]))
        if not desc or desc in seen:
            continue
        seen.add(desc)
        lines = [ln.split() for ln in desc.splitlines() if ln.strip()]
        body_lines.extend(lines)
        lines_per_ad.append(len(lines))
        words_per_line.extend(len(ln) for ln in lines)
    if not body_lines or not title_lines:
        raise ValueError(f"{path}: no titles or descriptions to learn from")
    return AdModel(
        body=_chain(body_lines),
        title=_chain(title_lines),
        lines_per_ad=tuple(lines_per_ad),
        words_per_line=tuple(words_per_line),
        words_per_title=tuple(words_per_title),
        locations=tuple(locations) or ("Italia",),
        source_ads=rows,
        distinct_descriptions=len(seen),
    )


class Generator:
    """Emits ads in arrival order; the same model, seed and shares give the same stream."""

    def __init__(
        self,
        model: AdModel,
        seed: int = 0,
        *,
        dup_share: float = 0.3,
        exact_share: float = 0.5,
        pool_size: int = 5000,
        start: datetime = datetime(2024, 1, 1, 8, 0, 0),
    ) -> None:
        if not 0.0 <= dup_share < 1.0:
            raise ValueError(f"dup_share must be in [0, 1), not {dup_share}")
        if not 0.0 <= exact_share <= 1.0:
            raise ValueError(f"exact_share must be in [0, 1], not {exact_share}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, not {pool_size}")
        self.model = model
        self.seed = seed
        self.dup_share = dup_share
        self.exact_share = exact_share
        self.pool_size = pool_size  # reposts copy one of the last pool_size originals
        self._rng = random.Random(seed)
        self._clock = start
        self._count = 0
        self._pool: list[tuple[str, dict[str, str]]] = []

    def ads(self, count: int) -> Iterator[dict[str, str]]:
        for _ in range(count):
            yield self.next_ad()

    def next_ad(self) -> dict[str, str]:
        rng = self._rng
        self._clock += timedelta(seconds=rng.randrange(1, 120))
        self._count += 1
        ad_id = f"gen{self.seed}-{self._count:08d}"
        if self._pool and rng.random() < self.dup_share:
            origin, text = rng.choice(self._pool)
            ad = self._repost(rng, origin, text)
        else:
            ad = self._original(rng)
            if len(self._pool) < self.pool_size:
                self._pool.append((ad_id, ad))
            else:
                self._pool[self._count % self.pool_size] = (ad_id, ad)
        return {
            "id": ad_id,
            **ad,
            "timestamp": self._clock.isoformat(timespec="seconds"),
            "link": f"https://annunci.example/offerta/{ad_id}",
        }

    # --- originals
    def _original(self, rng: random.Random) -> dict[str, str]:
        m = self.model
        title_len = max(1, m.words_per_title[int(rng.random() * len(m.words_per_title))])
        title = " ".join(m.title.walk(rng, min(title_len, 14)))
        n_lines = m.lines_per_ad[int(rng.random() * len(m.lines_per_ad))]
        lines = []
        for _ in range(max(1, min(n_lines, 40))):
            length = m.words_per_line[int(rng.random() * len(m.words_per_line))]
            lines.append(" ".join(m.body.walk(rng, max(1, min(length, 80)))))
        extras = [
            (0.4, lambda: edits.salary_line(rng)),
            (0.3, lambda: edits.phone_line(rng)),
            (0.3, lambda: edits.date_line(rng)),
            (0.3, lambda: rng.choice(edits.BOILERPLATE)),
        ]
        for p, make in extras:
            if rng.random() < p:
                lines.insert(rng.randrange(len(lines) + 1), make())
        return {
            "title": title,
            "description": "\n".join(lines),
            "location": m.locations[int(rng.random() * len(m.locations))],
            "repost_of": "",
            "edits": "",
        }

    # --- reposts
    def _repost(self, rng: random.Random, origin: str, original: dict[str, str]
                ) -> dict[str, str]:
        ad = dict(original)
        ad["repost_of"] = origin
        if rng.random() < self.exact_share:
            ad["edits"] = ""
            return ad
        kinds = rng.sample(EDIT_KINDS, rng.randint(1, 3))
        text = ad["description"]
        for kind in kinds:
            text = SCRAPER_EDITS[kind](rng, text)
        ad["description"] = text
        ad["edits"] = ",".join(sorted(kinds))
        return ad


def write_jsonl(ads: Iterator[dict[str, str]], out: IO[str]) -> int:
    """One JSON object per line (the format ``streamdedup check`` and producers read)."""
    n = 0
    for ad in ads:
        out.write(json.dumps(ad, ensure_ascii=False, separators=(",", ":")) + "\n")
        n += 1
    return n


def write_ads(dump: Path, count: int, seed: int, path: Path) -> None:
    """``count`` ads learnt from ``dump`` (30 % reposts), as JSONL at ``path``: the fresh
    content the benchmarks and the soak run on."""
    with path.open("w", encoding="utf-8") as out:
        write_jsonl(Generator(learn(dump), seed).ads(count), out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path, help="Kijiji-style TSV to learn from")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dup-share", type=float, default=0.3)
    parser.add_argument("--exact-share", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None, help="JSONL file [default: stdout]")
    args = parser.parse_args(argv)
    gen = Generator(learn(args.dump), args.seed, dup_share=args.dup_share,
                    exact_share=args.exact_share)
    if args.out is None:
        write_jsonl(gen.ads(args.count), sys.stdout)
    else:
        with args.out.open("w", encoding="utf-8") as fh:
            write_jsonl(gen.ads(args.count), fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
