"""Writing an evaluation: report.json, report.md, verdicts.jsonl and the PNG plots.

Takes the JSON-able dict that ``evaluation.evaluate`` builds (plus whatever the caller adds,
such as ``dump`` and ``settings``) and renders it; it computes nothing itself, so the JSON and
the Markdown always tell the same story. The plots are drawn by ``plots.py``.
``render_markdown`` renders the Markdown again from the JSON, e.g. for a copy kept apart from
its plots (``scripts/make-docs-report``: docs/REPORT.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streamdedup.core.verdict import Verdict
from streamdedup.replay.plots import plot_precision_recall, plot_s_curves

S_CURVES_PNG = "s_curves.png"
PRECISION_RECALL_PNG = "precision_recall.png"


def write_report(report: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write plots, report.json and report.md into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    if report.get("band_table") and report.get("similarity_histogram"):
        plot_s_curves(report, out / S_CURVES_PNG)
        plots["s_curves"] = S_CURVES_PNG
    if report.get("band_table"):
        plot_precision_recall(report, out / PRECISION_RECALL_PNG)
        plots["precision_recall"] = PRECISION_RECALL_PNG
    report["plots"] = plots
    for name in {S_CURVES_PNG, PRECISION_RECALL_PNG} - set(plots.values()):
        (out / name).unlink(missing_ok=True)  # an earlier run's, read as this one's
    paths = {"json": out / "report.json", "md": out / "report.md"}
    _write_text(paths["json"], json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    _write_text(paths["md"], render_markdown(report))
    paths.update({name: out / file for name, file in plots.items()})
    return paths


def remove_report(out_dir: str | Path) -> None:
    """Remove a report and its plots: a run stopped after it replaced ``verdicts.jsonl``
    would otherwise leave them describing an earlier run's verdicts (or half of each)."""
    for name in ("report.json", "report.md", S_CURVES_PNG, PRECISION_RECALL_PNG):
        (Path(out_dir) / name).unlink(missing_ok=True)


def write_verdicts(path: str | Path, verdicts: Iterable[Verdict]) -> int:
    """One verdict JSON per line, in the order given; returns how many."""
    lines = [v.to_json() for v in verdicts]
    _write_text(Path(path), "".join(line + "\n" for line in lines))
    return len(lines)


def _write_text(path: Path, text: str) -> None:
    """Atomic replace, so a report folder never holds a half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # IsADirectoryError when a folder holds the name
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------
# text


def summary(report: Mapping[str, Any]) -> str:
    """A few lines for the terminal."""
    lat = report.get("latency_ms", {})
    lines = [
        f"docs {report['docs']}  verdicts {report['verdicts']}  "
        f"missing {report.get('missing_verdicts', 0)}  dead letters {report['dead_letters']}",
        f"doc   precision {report['doc_precision']:.4f}  recall {report['doc_recall']:.4f}  "
        f"F1 {report['doc_f1']:.4f}",
        f"pairs precision {report['pair_precision']:.4f}  recall {report['pair_recall']:.4f}  "
        f"({report['pair_counts']['true_pairs']:,} true pairs)",
        f"clusters {report['clusters']} (truth {report['true_clusters']})",
    ]
    if report.get("docs_per_second"):
        lines.append(
            f"throughput {report['docs_per_second']:.0f} docs/s  latency ms "
            f"p50 {lat.get('p50', 0):.0f}  p95 {lat.get('p95', 0):.0f}  "
            f"p99 {lat.get('p99', 0):.0f}"
        )
    links = report.get("link_labels")
    if links and links["reposts"]:
        lines.append(f"link reposts flagged {links['flagged']}/{links['reposts']}")
    if report.get("elapsed_total_s"):
        lines.append(f"whole run {report['elapsed_total_s']:.1f} s")
    return "\n".join(lines)


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Mapping[str, Any], plot_base: str = "", note: str = "") -> str:
    """The human-readable report: numbers, the study's table, plots, and repost misses.

    ``plot_base`` prefixes the image links, for a Markdown file kept apart from its plots.
    """
    r = report
    out: list[str] = ["# Near-duplicate detection report", ""]
    if note:
        out += [note, ""]
    dump = r.get("dump")
    if dump:
        out.append(f"Dump `{dump.get('name', dump.get('path', '?'))}` "
                   f"(sha256 `{str(dump.get('sha256', ''))[:16]}…`, {r['docs']:,} documents, "
                   f"{r.get('distinct_sets', 0):,} distinct shingle sets).")
    settings = r.get("settings")
    if settings:
        out.append(
            (f"Preset `{settings['preset']}`: fields " if settings.get("preset")
             else "Settings: fields ")  # backfill's report names none (flags may override)
            + f"{', '.join(settings.get('text_fields', []))}; {settings.get('shingle_kind')} "
            f"{settings.get('shingle_size')}-shingles; {settings.get('num_perm')} permutations"
            + (f" (`{settings['minhash_scheme']}`)" if settings.get("minhash_scheme") else "")
            + f", {settings.get('bands')} bands x {settings.get('rows')} rows; "
            f"threshold {settings.get('threshold')}."
        )
    out += ["", "## Results", "", "| metric | value |", "|---|---|"]
    pc = r["pair_counts"]
    dc = r["doc_counts"]
    replay = r.get("replay") or {}
    dump = r.get("dump") or {}
    # A replay's missing count takes in the dead letters that never came (it said 0 of 0
    # while the command said 2 ids got nothing); a backfill's has only documents.
    missing = replay.get("missing", r.get("missing_verdicts", 0))
    rows = [
        ("documents / verdicts / missing", f"{r['docs']:,} / {r['verdicts']:,} / "
                                           f"{missing:,}"),
        ("dead letters", f"{r['dead_letters']:,}"),
        ("doc precision / recall / F1",
         f"{r['doc_precision']:.4f} / {r['doc_recall']:.4f} / {r['doc_f1']:.4f}"),
        ("doc counts", f"{dc['true_duplicates']:,} true duplicates, {dc['flagged']:,} flagged, "
                       f"{dc['fp']} FP, {dc['fn']} FN"),
        ("pair precision", f"{r['pair_precision']:.4f} ({pc['named_true']:,} of "
                           f"{pc['named_pairs']:,} named pairs are true)"),
        ("pair recall", f"{r['pair_recall']:.4f} ({pc['true_pairs_clustered']:,} of "
                        f"{pc['true_pairs']:,} true pairs share a final cluster)"),
        ("clusters (>= 2 docs): verdicts / truth", f"{r['clusters']:,} / {r['true_clusters']:,}"),
    ]
    if dump.get("unreadable_rows"):
        rows.append(("unreadable rows (not judged)", f"{dump['unreadable_rows']:,} of "
                                                   f"{dump['rows']:,}"))
    if pc.get("named_unknown_ids"):
        rows.append(("matches to ids not in the dump", f"{pc['named_unknown_ids']:,} (a store "
                     "that held other ads: a document flagged only for them is a false "
                     "positive here)"))
    if "produce_s" in replay:
        limit = (f"at most {replay['rate_limit']:g}/s" if replay.get("rate_limit")
                 else "no rate limit: latency includes the queue")
        sent = replay.get("sent", r["docs"] + r["dead_letters"])
        rows.append(("sent to the input topic", f"{sent:,} messages "
                                                f"in {replay['produce_s']:.2f} s ({limit})"))
    if r.get("docs_per_second"):
        lat = r["latency_ms"]
        rows += [
            ("throughput", f"{r['docs_per_second']:.0f} docs/s over {r['elapsed_s']:.2f} s"),
            ("latency p50 / p95 / p99",
             f"{lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f} ms"),
        ]
    if r.get("elapsed_total_s"):
        rows.append(("whole run", f"{r['elapsed_total_s']:.1f} s"))
    out += [f"| {k} | {_md_cell(v)} |" for k, v in rows]

    apart = r.get("unclustered_examples")
    if apart:
        cap = (r.get("settings") or {}).get("max_matches")
        out += ["", "True pairs that no verdict link joins (examples): the later document's "
                    "verdict neither names the earlier one among its matches"
                    + (f" (at most {cap} are listed)" if cap else "")
                    + " nor shares a cluster id with it.", "",
                "| earlier | later | Jaccard | later verdict: duplicate, matches listed |",
                "|---|---|---|---|"]
        for e in apart:
            state = (f"{'yes' if e['later_duplicate'] else 'no'}, {e['later_matches']}"
                     if e["later_has_verdict"] else "no verdict")
            out.append(f"| {_md_cell(e['earlier'])} | {_md_cell(e['later'])} | "
                       f"{e['jaccard']:.4f} | {state} |")

    table = r.get("band_table")
    if table:
        out += ["", "## LSH settings against brute force (the original study's table)", "",
                "All documents at once, not streaming: a candidate pair shares at least one "
                "band. FP rate = " + table["fp_rate_definition"] + "; FN rate = "
                + table["fn_rate_definition"] + " (as the study defined them). Times are "
                "signing + banding + grouping, from shingle sets; brute force is exact "
                "Jaccard over all pairs: `truth.all_pairs` collapses identical texts and "
                "uses one sparse product"
                + (" (timed when the ground truth was cached)" if
                   table.get("brute_force_cached") else "")
                + "; the pair-by-pair time, as the study compared, is extrapolated from "
                "timing `jaccard()` on 10,000 random pairs.", "",
                "| bands x rows | permutations | P(candidate) at threshold | candidate pairs | "
                "true pairs | FP rate (pairs) | FN rate (pairs) | time (s) |",
                "|---|---|---|---|---|---|---|---|"]
        for row in table["rows"]:
            fp = row["candidate_pairs"] - row["true_candidates"]
            fn = row["true_pairs"] - row["true_candidates"]
            out.append(
                f"| {row['setting']} | {row['num_perm']} | {row['p_at_threshold']:.6f} | "
                f"{row['candidate_pairs']:,} | {row['true_pairs']:,} | "
                f"{row['fp_rate']:.6f} ({fp:,}) | {row['fn_rate']:.6f} ({fn:,}) | "
                f"{row['time_s']:.2f} |"
            )
        true_pairs = r["pair_counts"]["true_pairs"]
        out.append(f"| brute force (`truth.all_pairs`) | — | — | — | {true_pairs:,} | — | — | "
                   f"{table['brute_force_s']:.2f} |")
        if "pairwise_estimate_s" in table:
            out.append(f"| brute force, pair by pair (estimated from a sample) | — | — | — | "
                       f"{true_pairs:,} | — | — | {table['pairwise_estimate_s']:.1f} |")
        if all("distinct" in row for row in table["rows"]):
            out += ["", "The same between distinct texts (exact copies, which every setting "
                        "finds, left out):", "",
                    "| bands x rows | candidate pairs | true pairs | FP rate (pairs) | "
                    "FN rate (pairs) |", "|---|---|---|---|---|"]
            for row in table["rows"]:
                d = row["distinct"]
                fp = d["candidate_pairs"] - d["true_candidates"]
                fn = d["true_pairs"] - d["true_candidates"]
                out.append(f"| {row['setting']} | {d['candidate_pairs']:,} | "
                           f"{d['true_pairs']:,} | {d['fp_rate']:.4f} ({fp:,}) | "
                           f"{d['fn_rate']:.4f} ({fn:,}) |")
    plots = r.get("plots") or {}
    if plots:
        out += ["", "## Plots", ""]
        if "s_curves" in plots:
            out += [f"![S-curves over true pair similarities]({plot_base}{plots['s_curves']})",
                    ""]
        if "precision_recall" in plots:
            out += [f"![Precision and recall per setting]({plot_base}"
                    f"{plots['precision_recall']})", ""]

    links = r.get("link_labels")
    if links:
        out += ["", "## The dump's own labels: reposts sharing a link", "",
                f"{links['reposts']:,} rows repeat the `link` of an earlier row "
                f"({links['links']:,} links). The verdicts flag {links['flagged']:,} of them as "
                f"duplicates; {links['true_duplicates']:,} reach the threshold against an earlier "
                f"row of their link; {links['same_cluster_as_first']:,} end in the cluster of "
                f"their link's first row."]
        if links["misses"]:
            out += ["", f"Reposts not flagged (most similar first, {len(links['misses'])} of "
                        f"{links['missed']}):", "",
                    "| Jaccard | first row | repost |", "|---|---|---|"]
            for m in links["misses"]:
                out.append(
                    f"| {m['jaccard']:.3f} (best {m['best_jaccard']:.3f}) | "
                    f"**{_md_cell(m['first_id'])}** {_md_cell(m['first_title'])}: "
                    f"{_md_cell(m['first_text'])} | **{_md_cell(m['id'])}** "
                    f"{_md_cell(m['title'])}: {_md_cell(m['text'])} |"
                )
    defs = r.get("definitions")
    if defs:
        out += ["", "## Definitions", ""]
        out += [f"- **{k}**: {v}" for k, v in defs.items()]
        out.append(f"- **clusters**: {r.get('cluster_definition', '')}; with singletons: "
                   f"{r.get('components_with_singletons', '?')} (verdicts), "
                   f"{r.get('true_components_with_singletons', '?')} (truth)")
    return "\n".join(out) + "\n"
