"""PNG plots (matplotlib, headless): the LSH S-curve."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from streamdedup.lsh import p_candidate


def plot_scurve(settings: Sequence[tuple[int, int]], threshold: float, out: Path) -> None:
    """P(candidate | s) for each (bands, rows), the threshold as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = np.linspace(0.0, 1.0, 501)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for bands, rows in settings:
        at = p_candidate(threshold, bands, rows)
        ax.plot(s, p_candidate(s, bands, rows), label=f"{bands} x {rows} (P={at:.4f} at t)")
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
    plt.close(fig)
