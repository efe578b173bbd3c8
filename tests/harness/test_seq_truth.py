"""Truth in arrival order (``seq_truth``, ``check_seq_order``) on hand-made sets."""

from __future__ import annotations

from shingle_sets import u64

from harness.seq_truth import check_seq_order, reader_clusters, seq_truth

SETS = {
    "a": u64(1, 2, 3, 4, 5),
    "b": u64(1, 2, 3, 4, 6),      # J(a, b) = 4/6
    "c": u64(1, 2, 3, 4, 5),      # a copy of a
    "d": u64(90, 91),
    "e": u64(),                   # empty: never a duplicate
}


def test_a_document_is_a_duplicate_only_of_smaller_seqs() -> None:
    seqs = {"a": 3, "b": 1, "c": 2, "d": 4, "e": 5}
    assert seq_truth(SETS, seqs, 0.6) == {"a": True, "b": False, "c": True, "d": False,
                                          "e": False}
    assert seq_truth(SETS, seqs, 0.7) == {"a": True, "b": False, "c": False, "d": False,
                                          "e": False}


def verdict(seq: int, dup: bool, matches: tuple[str, ...] = ()) -> dict[str, object]:
    return {"seq": seq, "duplicate": dup, "matches": [{"id": m, "jaccard": 1.0} for m in matches]}


def test_the_check_counts_every_kind_of_wrong_answer() -> None:
    right = {"a": verdict(1, False), "b": verdict(2, True, ("a",)), "c": verdict(3, True, ("a",)),
             "d": verdict(4, False), "e": verdict(5, False)}
    report = check_seq_order(right, SETS, 0.6)
    assert (report["false_positives"], report["false_negatives"], report["precision"],
            report["recall"], report["self_or_later_matches"]) == (0, 0, 1.0, 1.0, 0)
    wrong = {**right, "b": verdict(2, False), "d": verdict(4, True, ("d",)),
             "e": verdict(4, False), "a": verdict(1, True, ("c",))}
    report = check_seq_order(wrong, SETS, 0.6)
    assert report["false_negatives"] == 1 and report["false_positives"] == 2
    assert report["self_or_later_matches"] == 2 and report["repeated_seqs"] == 1
    assert check_seq_order({"a": {"seq": "1", "duplicate": False}}, SETS, 0.6)["bad_seq"] == 1


def test_the_clusters_a_reader_makes_of_the_verdicts_are_checked() -> None:
    """a, b and c are one component at 0.6, d and e are each alone. A merge announced only
    by a later verdict's ``cluster_id`` is no merge for a reader: c's cluster "b" stays apart
    unless a verdict names "b" in ``merged``."""
    def v(seq: int, cluster: str, *merged: str) -> dict[str, object]:
        return {"seq": seq, "duplicate": cluster != "", "cluster_id": cluster,
                "merged": list(merged), "matches": []}

    right = {"b": v(1, "b"), "c": v(2, "b"), "a": v(3, "b"), "d": v(4, "d"), "e": v(5, "e")}
    report = check_seq_order(right, SETS, 0.6)
    assert (report["clusters"], report["clusters_unlike_the_truth"]) == (3, 0)
    # c claims "c" while b, judged elsewhere, was still to come; a then links both
    moved = {"b": v(1, "b"), "c": v(2, "c"), "a": v(3, "b", "c"), "d": v(4, "d"),
             "e": v(5, "e")}
    assert check_seq_order(moved, SETS, 0.6)["clusters_unlike_the_truth"] == 0
    assert sorted(map(sorted, reader_clusters(moved))) == [["a", "b", "c"], ["d"], ["e"]]
    unannounced = {**moved, "a": v(3, "b")}  # the merge of "c" is in no verdict
    report = check_seq_order(unannounced, SETS, 0.6)
    assert report["clusters_unlike_the_truth"] == 2
    assert report["examples"]["clusters_unlike_the_truth"] == ["a", "c"]
    capped = {**unannounced, "a": {**v(3, "b"), "skipped": 1}}  # a match may be unseen
    assert check_seq_order(capped, SETS, 0.6)["clusters_unlike_the_truth"] is None
