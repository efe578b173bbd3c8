"""``streamdedup tail``: one readable line per verdict as it arrives (pure formatting here;
the loop reads the topics with ``observer.py`` and keeps counts in ``state.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamdedup.monitor.state import MonitorState


def line(verdict: Mapping[str, Any], state: MonitorState, width: int = 60) -> str:
    """``id  DUPLICATE of X  J=0.923  cluster C (7)  title`` or ``id  new  cluster C (1)``."""
    doc_id = str(verdict.get("id"))
    label = str(verdict.get("cluster_id") or doc_id)
    cluster = state.clusters.get(state.merged_into.get(label, label))
    size = cluster.size if cluster is not None else 1
    title = state.title(doc_id) or ""
    if len(title) > width:
        title = title[: width - 1] + "…"
    if verdict.get("duplicate"):
        # J of this pair: duplicate_of is the earliest match, matches[0] the best (it showed
        # 0.909 beside an X at 0.847); not shown when the cap left X out of matches
        first = verdict.get("duplicate_of")
        matches = [m for m in verdict.get("matches") or [] if isinstance(m, Mapping)]
        pair = next((m.get("jaccard") for m in matches if m.get("id") == first), None)
        what = f"DUPLICATE of {first}" + (
            f"  J={pair:.3f}" if isinstance(pair, (int, float)) else "")
        if verdict.get("exact"):  # the set equals an earlier one's: the best match, J = 1
            copy = matches[0].get("id") if matches else first
            what += " (exact)" if copy == first else f" (an exact copy of {copy})"
    else:
        what = "new"
    return f"{doc_id}  {what}  cluster {label} ({size})" + (f"  {title}" if title else "")
