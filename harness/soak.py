"""The retention soak: millions of generated ads through ``streamdedup check --retention``,
with the store's size, the process's RSS and the throughput sampled as it runs.

What it shows (issue 16): once the window is full, the store and the memory stop growing and
the throughput stays flat, and the verdicts are those of a brute force restricted to the
window. The generator's clock advances 1-120 s per ad (60 s on average), so a 60-day window
holds ~86,000 ads and 2,000,000 ads span ~3.8 years.

Usage::

    python -m harness.soak ../shared/data/kijiji_jobs.tsv --count 2000000 --out out/soak

writes ``ads.jsonl`` (regenerated only if missing or of another size), ``verdicts.jsonl``,
``samples.json`` (one sample every ``--every`` seconds), ``summary.json`` and, with the report
extra, ``soak.png``. The brute force checks ``--sample`` documents in each of three places of
the stream against every earlier ad in their window (exact Jaccard of the same shingles).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import child_env
from harness.chaos.resources import dir_bytes, rss_mb
from harness.generator import write_ads
from streamdedup.core.jaccard import jaccard, size_bounds
from streamdedup.core.retention import parse_time
from streamdedup.core.sketch import Sketcher
from streamdedup.process import ChildProcess
from streamdedup.settings import build_settings, parse_duration


def generate(dump: Path, count: int, seed: int, path: Path, say: Any) -> None:
    stamp = path.with_suffix(".count")
    if path.exists() and stamp.exists() and stamp.read_text() == f"{count} {seed}":
        say(f"soak: reusing {path} ({count:,} ads)")
        return
    say(f"soak: generating {count:,} ads into {path}")
    write_ads(dump, count, seed, path)
    stamp.write_text(f"{count} {seed}")


def run_check(ads: Path, out: Path, retention: str, every: float, say: Any
              ) -> list[dict[str, float]]:
    """Run the product's ``check`` and sample it until it exits."""
    store = out / "store"
    verdicts = out / "verdicts.jsonl"
    argv = [sys.executable, "-m", "streamdedup", "check", str(ads), "--store", str(store),
            "--out", str(verdicts), *(["--retention", retention] if retention else [])]
    child = ChildProcess("check", argv, out / "check.log", env=child_env()).start()
    samples: list[dict[str, float]] = []
    start, lines, offset = time.monotonic(), 0, 0
    while child.alive():
        time.sleep(every)
        if verdicts.exists():
            with verdicts.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            lines += chunk.count(b"\n")
            offset += len(chunk)
        rss = rss_mb(child.pid) if child.pid else None
        if rss is None or not store.exists():
            continue
        samples.append({"t": round(time.monotonic() - start, 1), "docs": lines,
                        "rss_mb": round(rss, 1), "store_mb": round(dir_bytes(store) / 2**20, 1)})
        if len(samples) % 12 == 0:
            say(f"soak: {samples[-1]}")
    if child.returncode != 0:
        raise SystemExit(f"check failed ({child.returncode}): " + "\n".join(child.lines[-20:]))
    say("soak: " + (child.lines[-1] if child.lines else "check done"))
    return samples


def brute_force(ads: Path, verdicts: Path, count: int, window_ms: int, sample: int,
                say: Any) -> dict[str, Any]:
    """Exact Jaccard of ``sample`` consecutive documents at 25 %, 60 % and 95 % of the stream
    against every earlier ad in their window; compared with the verdicts' duplicate flags."""
    settings = build_settings()
    sketcher = Sketcher(settings, text_cache=0)
    t = settings.threshold
    starts = [int(count * f) for f in (0.25, 0.60, 0.95)]
    checked = agree = missed = extra = duplicates = 0
    window: deque[tuple[int, np.ndarray]] = deque()
    with ads.open(encoding="utf-8") as fa, verdicts.open(encoding="utf-8") as fv:
        for i, (line, verdict_line) in enumerate(zip(fa, fv, strict=False)):
            if i >= starts[-1] + sample:
                break
            ad = json.loads(line)
            when = parse_time(ad["timestamp"])
            near = any(s - 100_000 <= i < s + sample for s in starts)  # ~ a window before
            if not near:
                continue
            shingles = sketcher.shingle_fields({k: ad.get(k, "") for k in
                                                settings.text_fields}).shingles
            while window and window[0][0] < when - window_ms:
                window.popleft()
            if any(s <= i < s + sample for s in starts):
                lo, hi = size_bounds(shingles.size, t)
                truth = any(lo <= o.size <= hi and jaccard(shingles, o) >= t
                            for _, o in window)
                got = json.loads(verdict_line)["duplicate"]
                checked += 1
                duplicates += truth
                agree += truth == got
                missed += truth and not got
                extra += got and not truth
            window.append((when, shingles))
    say(f"soak: brute force over the window: {agree}/{checked} agree ({duplicates} "
        f"duplicates), {missed} missed, {extra} extra")
    return {"checked": checked, "duplicates": duplicates, "agree": agree, "missed": missed,
            "extra": extra}


def summarize(samples: Sequence[dict[str, float]], window_docs: int) -> dict[str, Any]:
    """Size, memory and throughput after the window filled, by quarter of the rest."""
    full = [s for s in samples if s["docs"] >= 2 * window_docs]
    out: dict[str, Any] = {"window_docs": window_docs}
    if len(full) < 8:
        return out
    quarters = np.array_split(np.arange(len(full)), 4)
    rows = []
    for q in quarters:
        first, last = full[q[0]], full[q[-1]]
        rows.append({
            "docs": [first["docs"], last["docs"]],
            "store_mb_max": max(full[i]["store_mb"] for i in q),
            "rss_mb_max": max(full[i]["rss_mb"] for i in q),
            "docs_per_s": round((last["docs"] - first["docs"]) /
                                max(last["t"] - first["t"], 1e-9)),
        })
    out["quarters_after_two_windows"] = rows
    return out


def plot(samples: Sequence[dict[str, float]], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    docs = [s["docs"] / 1e6 for s in samples]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(docs, [s["store_mb"] for s in samples], label="store on disk (MB)")
    ax.plot(docs, [s["rss_mb"] for s in samples], label="check RSS (MB)")
    ax.set_xlabel("ads processed (millions)")
    ax.set_ylabel("MB")
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump", type=Path, help="Kijiji-style TSV the generator learns from")
    p.add_argument("--count", type=int, default=2_000_000)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--retention", default="60d")
    p.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--sample", type=int, default=100, help="documents per brute-force place")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    def say(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    ads = args.out / "ads.jsonl"
    generate(args.dump, args.count, args.seed, ads, say)
    for stale in (args.out / "store", args.out / "verdicts.jsonl"):
        if stale.is_dir():
            for f in stale.iterdir():
                f.unlink()
        elif stale.exists():
            stale.unlink()
    samples = run_check(ads, args.out, args.retention, args.every, say)
    window_ms = parse_duration(args.retention) or 0
    window_docs = window_ms // 60_500  # the generator's mean gap: 60.5 s
    summary = {"count": args.count, "retention": args.retention,
               **summarize(samples, window_docs),
               "brute_force": brute_force(ads, args.out / "verdicts.jsonl", args.count,
                                          window_ms, args.sample, say) if window_ms else None,
               "final": samples[-1] if samples else None}
    (args.out / "samples.json").write_text(json.dumps(samples))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(samples, args.out / "soak.png",
         f"{args.count:,} generated ads, retention {args.retention or 'off'}")
    say(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
