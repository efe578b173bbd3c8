"""The written report: every required key in report.json, the same numbers in report.md,
real PNG plots, and a summary for the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evaluation_cases import detect, generated_docs, make_settings, truth_for

from streamdedup.core.verdict import Verdict
from streamdedup.replay import evaluation as ev
from streamdedup.replay import report as rp

REQUIRED = (
    "docs", "verdicts", "dead_letters", "doc_precision", "doc_recall", "doc_f1",
    "pair_precision", "pair_recall", "clusters", "true_clusters", "docs_per_second",
    "latency_ms",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def evaluated() -> tuple[dict[str, Any], list[Verdict]]:
    docs = generated_docs()
    settings = make_settings()
    verdicts = detect(docs, settings)
    produced = {d.id: 100.0 + k * 0.01 for k, d in enumerate(docs)}
    seen = {d.id: t + 0.02 for d, t in zip(docs, produced.values(), strict=True)}
    report = ev.evaluate(docs, verdicts, truth_for(docs, settings), settings, dead_letters=2,
                         produced_at=produced, verdict_at=seen)
    report["settings"] = {"preset": "default", "text_fields": ["title", "description"]}
    return report, [verdicts[d.id] for d in docs]


def test_write_report_files(tmp_path: Path, evaluated: tuple[dict[str, Any], list[Verdict]]
                            ) -> None:
    report, _ = evaluated
    paths = rp.write_report(dict(report), tmp_path / "out")
    written = json.loads(paths["json"].read_text(encoding="utf-8"))
    for key in REQUIRED:
        assert key in written, key
    assert set(written["latency_ms"]) >= {"p50", "p95", "p99"}
    assert written["latency_ms"]["p50"] == pytest.approx(20.0)
    assert written["dead_letters"] == 2
    assert written["band_table"]["rows"] and written["link_labels"]["reposts"] == 12
    for name in ("s_curves", "precision_recall"):
        assert paths[name].read_bytes()[:8] == PNG_MAGIC
        assert written["plots"][name] == paths[name].name
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_markdown_tells_the_same_numbers(
    tmp_path: Path, evaluated: tuple[dict[str, Any], list[Verdict]]
) -> None:
    report, _ = evaluated
    md = rp.write_report(dict(report), tmp_path)["md"].read_text(encoding="utf-8")
    assert f"{report['doc_precision']:.4f} / {report['doc_recall']:.4f}" in md
    assert f"{report['pair_counts']['true_pairs']:,} true pairs" in md
    for row in report["band_table"]["rows"]:
        assert f"| {row['setting']} | {row['num_perm']} |" in md
    assert "| brute force (`truth.all_pairs`) |" in md
    assert "| brute force, pair by pair (estimated from a sample) |" in md
    assert "The same between distinct texts" in md
    assert "FP rate = candidate pairs that are not true pairs / candidate pairs" in md
    assert "](s_curves.png)" in md and "](precision_recall.png)" in md
    assert "Reposts not flagged" in md
    for miss in report["link_labels"]["misses"]:
        assert miss["id"] in md


def test_markdown_lists_true_pairs_apart(tmp_path: Path,
                                        evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    report = {**evaluated[0], "settings": {"max_matches": 10}, "unclustered_examples": [
        {"earlier": "7", "later": "9", "jaccard": 0.81, "later_duplicate": True,
         "later_matches": 10, "later_has_verdict": True}]}
    md = rp.render_markdown(report)
    assert "(at most 10 are listed)" in md
    assert "| 7 | 9 | 0.8100 | yes, 10 |" in md
    # backfill's report names no preset: it said Preset `?`
    assert "Settings: fields " in md and "Preset" not in md
    named = rp.render_markdown({**report, "settings": {"preset": "reference"}})
    assert "Preset `reference`: fields " in named


def test_markdown_counts_what_a_replay_sent_and_never_got_back(
        evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    """Two rows that could only be dead letters, none of which came back: the report said
    "0 / 0 / 0" and "sent 0 messages" while the command said 2 ids got nothing; unreadable
    rows and matches to ids outside the dump (a store that held other ads) were in
    report.json only."""
    report = {**evaluated[0], "docs": 0, "verdicts": 0, "dead_letters": 0,
              "missing_verdicts": 0,
              "replay": {"produce_s": 0.5, "rate_limit": 0, "sent": 2, "missing": 2},
              "dump": {"rows": 7, "unreadable_rows": 5},
              "pair_counts": {**evaluated[0]["pair_counts"], "named_unknown_ids": 186}}
    md = rp.render_markdown(report)
    assert "| documents / verdicts / missing | 0 / 0 / 2 |" in md
    assert "| sent to the input topic | 2 messages in 0.50 s" in md
    assert "| unreadable rows (not judged) | 5 of 7 |" in md
    assert "| matches to ids not in the dump | 186 (a store that held other ads" in md


def test_markdown_escapes_table_cells() -> None:
    assert rp._md_cell("a | b\nc") == "a \\| b c"


def test_write_verdicts_jsonl(tmp_path: Path,
                              evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    _, verdicts = evaluated
    path = tmp_path / "verdicts.jsonl"
    assert rp.write_verdicts(path, verdicts) == len(verdicts)
    back = [Verdict.from_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert back == verdicts


def test_a_name_held_by_a_folder_is_an_error_that_leaves_no_temporary_file(
        tmp_path: Path, evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    (tmp_path / "verdicts.jsonl").mkdir()
    with pytest.raises(IsADirectoryError):
        rp.write_verdicts(tmp_path / "verdicts.jsonl", evaluated[1])
    assert [p.name for p in tmp_path.iterdir()] == ["verdicts.jsonl"]


def test_summary(evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    report, _ = evaluated
    text = rp.summary(report)
    assert f"precision {report['doc_precision']:.4f}" in text
    assert "docs/s" in text and "p99" in text
    assert f"link reposts flagged {report['link_labels']['flagged']}/12" in text


def test_report_without_band_table_has_no_plots(tmp_path: Path) -> None:
    docs = generated_docs()
    settings = make_settings()
    report = ev.evaluate(docs, detect(docs, settings), truth_for(docs, settings), settings,
                         with_band_table=False)
    (tmp_path / rp.S_CURVES_PNG).write_bytes(PNG_MAGIC)  # an earlier run's, in the same folder
    paths = rp.write_report(report, tmp_path)
    assert set(paths) == {"json", "md"}
    assert "## Plots" not in paths["md"].read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_render_again_from_json(tmp_path: Path,
                                evaluated: tuple[dict[str, Any], list[Verdict]]) -> None:
    """As scripts/make-docs-report renders docs/REPORT.md: from the JSON, plots elsewhere."""
    report, _ = evaluated
    paths = rp.write_report(dict(report), tmp_path)
    again = json.loads(paths["json"].read_text(encoding="utf-8"))
    md = rp.render_markdown(again, "report/", "Made by hand.")
    assert "](report/s_curves.png)" in md and "](report/precision_recall.png)" in md
    assert md.splitlines()[2] == "Made by hand."
    assert md.replace("report/", "").replace("Made by hand.\n\n", "") == \
        paths["md"].read_text(encoding="utf-8")
