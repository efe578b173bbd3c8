"""PNG plots (matplotlib's object API, headless): the LSH S-curve of a setting, and the
replay report's S-curves over true pair similarities and precision/recall per band layout.

matplotlib is the ``report`` extra: nothing here is imported by the consumer, and a missing
matplotlib is one clear error (``MissingExtraError``) naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamdedup.core import lsh
from streamdedup.extras import require


def _figure_class() -> Any:
    """matplotlib's ``Figure``: drawn without pyplot, so no GUI backend is ever chosen."""
    return require("matplotlib.figure", "plots").Figure


def image_formats() -> list[str]:
    """The file name suffixes matplotlib writes (png, pdf, svg...): a name it cannot write
    was a ValueError traceback after the plot was drawn."""
    backend_bases = require("matplotlib.backend_bases", "plots")
    return sorted(backend_bases.FigureCanvasBase.get_supported_filetypes())


def plot_scurve(settings: Sequence[tuple[int, int]], threshold: float, out: Path) -> None:
    """P(candidate | s) for each (bands, rows), the threshold as a vertical line."""
    Figure = _figure_class()
    s = np.linspace(0.0, 1.0, 501)
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for bands, rows in settings:
        at = lsh.p_candidate(threshold, bands, rows)
        ax.plot(s, lsh.p_candidate(s, bands, rows), label=f"{bands} x {rows} (P={at:.6f} at t)")
    ax.axvline(threshold, color="grey", linestyle="--", label=f"threshold {threshold}")
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate)")
    ax.set_title("LSH S-curve: 1 - (1 - s^r)^b")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)


def _distinct_layouts(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    seen: set[tuple[int, int]] = set()
    out = []
    for row in rows:
        key = (row["bands"], row["rows"])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def plot_s_curves(report: Mapping[str, Any], path: Path) -> None:
    """P(candidate) of each setting over the histogram of true pair similarities (log)."""
    Figure = _figure_class()

    hist = report["similarity_histogram"]
    edges = np.asarray(hist["edges"])
    counts = np.asarray(hist["counts"], dtype=float)
    threshold = report["threshold"]
    fig = Figure(figsize=(8, 4.8), dpi=110)
    ax = fig.add_subplot()
    ax.bar(edges[:-1], np.where(counts > 0, counts, np.nan), width=np.diff(edges),
           align="edge", color="#c8d3e0", edgecolor="#8fa3bb", linewidth=0.4,
           label="document pairs")
    ax.set_yscale("log")
    ax.set_xlabel("exact Jaccard similarity")
    ax.set_ylabel(f"document pairs (similarity >= {hist['min_sim']:g}, log)")
    ax.set_xlim(0, 1)
    curves = ax.twinx()
    s = np.linspace(0, 1, 401)
    for row in _distinct_layouts(report["band_table"]["rows"]):
        curves.plot(s, lsh.p_candidate(s, row["bands"], row["rows"]), linewidth=1.6,
                    label=f"{row['bands']}x{row['rows']}")
    curves.axvline(threshold, color="black", linestyle="--", linewidth=1,
                   label=f"threshold {threshold:g}")
    curves.set_ylim(0, 1.02)
    curves.set_ylabel("P(candidate pair)")
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = curves.get_legend_handles_labels()
    fig.legend(handles + h2, labels + l2, loc="lower center", ncol=len(labels + l2),
               fontsize=8, frameon=False)
    ax.set_title("LSH S-curves over the similarities of document pairs")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, format="png")


def plot_precision_recall(report: Mapping[str, Any], path: Path) -> None:
    """Candidate precision/recall of each LSH setting, and the verified verdicts' pair P/R."""
    Figure = _figure_class()

    rows = report["band_table"]["rows"]
    names = [row["setting"] for row in rows]
    prec = [row["candidate_precision"] for row in rows]
    rec = [row["candidate_recall"] for row in rows]
    if report.get("verdicts"):
        names.append("verdicts\n(verified)")
        prec.append(report["pair_precision"])
        rec.append(report["pair_recall"])
    x = np.arange(len(names))
    fig = Figure(figsize=(8, 4.4), dpi=110)
    ax = fig.add_subplot()
    width = 0.38
    for offset, values, label, color in ((-width / 2, prec, "precision", "#4c72b0"),
                                         (width / 2, rec, "recall", "#dd8452")):
        bars = ax.bar(x + offset, values, width, label=label, color=color)
        ax.bar_label(bars, labels=[f"{v:.4f}" for v in values], fontsize=7, rotation=90,
                     padding=2)
    low = min(prec + rec)
    ax.set_ylim(max(0.0, low - (1.0 - low) * 0.5 - 0.01), 1.0 + (1.0 - low) * 0.35 + 0.004)
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylabel("pair precision / recall")
    ax.set_title("LSH candidates (before exact verification) and final verdicts")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
