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
        matches = verdict.get("matches") or [{}]
        best = matches[0].get("jaccard")
        what = f"DUPLICATE of {verdict.get('duplicate_of')}" + (
            f"  J={best:.3f}" if isinstance(best, (int, float)) else "")
        if verdict.get("exact"):
            what += " (exact)"
    else:
        what = "new"
    return f"{doc_id}  {what}  cluster {label} ({size})" + (f"  {title}" if title else "")
