"""The monitor's explain against the verdict it read (the thread and the web server are
tested with the real broker in test_monitor.py)."""

from __future__ import annotations

import threading

from streamdedup.core.sketch import Sketcher
from streamdedup.monitor.server import Monitor
from streamdedup.monitor.state import MonitorState
from streamdedup.settings import build_settings

A = {"title": "Sviluppatore Java", "description": "Cerchiamo sviluppatore Java con esperienza "
     "in Spring e Hibernate per progetto bancario a Milano, contratto indeterminato."}
B = {**A, "description": A["description"] + " Inviare il curriculum."}


def monitor(preset: str) -> Monitor:
    m = Monitor.__new__(Monitor)  # no observer: the state is filled by hand
    m.settings = build_settings(preset, env={})
    m.state, m.lock, m.sketcher = MonitorState(), threading.Lock(), Sketcher(m.settings)
    return m


def filled(preset: str, measured: float) -> Monitor:
    m = monitor(preset)
    m.state.add_text("a", A)
    m.state.add_text("b", B)
    m.state.add_verdict({"id": "b", "seq": 2, "duplicate": True, "duplicate_of": "a",
                         "cluster_id": "a", "matches": [{"id": "a", "jaccard": measured}]})
    return m


def test_explain_says_when_its_settings_are_not_the_detectors() -> None:
    """Another preset than the detector's explained 155 of 200 duplicates as "not a
    duplicate", silently; the verdict's own Jaccard tells the two apart."""
    measured = filled("default", 0.0).explain("b", "a")["jaccard"]  # the detector's preset
    assert isinstance(measured, float) and 0 < measured < 1
    assert "warning" not in filled("default", measured).explain("b", "a")
    other = filled("reference", measured).explain("b", "a")
    assert other["jaccard"] != measured
    assert "start the monitor with the detector's --preset" in str(other["warning"])
