"""`streamdedup explain` from a dump (the topics' path is tested with a real broker in
tests/monitor/test_monitor.py): the side-by-side reading, and bad requests in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from command_line import ADS, run, write_tsv


def _dump(tmp_path: Path, name: str = "ads.tsv") -> Path:
    return write_tsv(tmp_path / name, [[t, d, "Milano", "2020", f"l{i}"]
                                       for i, (t, d) in enumerate(ADS)])


def test_two_ads_of_a_dump_side_by_side(tmp_path: Path) -> None:
    code, out, err = run("explain", "0", "1", "--dump", str(_dump(tmp_path)), "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["jaccard"] == 1.0 and found["duplicate"] is True


def test_json_writes_out_the_controls_json_leaves_raw(tmp_path: Path) -> None:
    dump = tmp_path / "ads.jsonl"
    raw = "cuoco \u202eesperto\x9b[2J milano"
    dump.write_text(json.dumps({"id": "a", "description": raw}) + "\n"
                    + json.dumps({"id": "b", "description": "cuoco esperto"}) + "\n")
    code, out, err = run("explain", "a", "b", "--dump", str(dump), "--json")
    assert code == 0, err
    assert "\u202e" not in out and "\x9b" not in out and "\\u202e" in out
    assert raw in json.loads(out)["a"]["raw"]


def test_what_differs_is_marked_and_the_json_has_both_kinds_of_span(tmp_path: Path) -> None:
    """A 0.91 pair marked by what it shares was marked nearly whole; its changed word is
    what a reader looks for."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text(json.dumps({"id": "a", "title": "", "description": "cuoco esperto milano "
                                "sera"}) + "\n" + json.dumps(
        {"id": "b", "title": "", "description": "cuoco esperto roma sera"}) + "\n")
    words = ("--shingle-kind", "word", "--shingle-size", "1", "--stopwords", "",
             "--stem-language", "", "--threshold", "0.5")
    code, out, err = run("explain", "a", "b", "--dump", str(dump), "--no-color", *words)
    assert code == 0, err
    first = out.splitlines()[2]
    assert "cuoco esperto [milano] sera" in first and "cuoco esperto [roma] sera" in first
    code, out, err = run("explain", "a", "b", "--dump", str(dump), "--json", *words)
    side = json.loads(out)["a"]
    # --color into a pipe (`| less -R`): click took the colours off, and no brackets came
    piped = subprocess.run([sys.executable, "-m", "streamdedup", "explain", "a", "b", "--dump",
                            str(dump), "--color", *words], capture_output=True, text=True,
                           timeout=120)
    assert "\x1b[30;43mmilano\x1b[0m" in piped.stdout, piped.stdout + piped.stderr
    assert (side["shared"], side["differs"]) == ([[0, 13], [21, 25]], [[14, 20]])


def test_a_document_is_not_explained_against_itself(tmp_path: Path) -> None:
    """It would read as 'a duplicate' of itself, which no verdict ever says."""
    code, _, err = run("explain", "0", "0", "--dump", str(_dump(tmp_path)))
    assert code == 2 and "both '0': give two ids" in err, err
    for ids, said in ((["", "0"], "DOC_ID is empty"), (["0", " "], "OTHER_ID is empty")):
        code, _, err = run("explain", *ids, "--dump", str(_dump(tmp_path)))  # the whole
        assert code == 2 and said in err, err  # topic was read for it, then exit 1


def test_a_dump_whose_name_says_no_format_takes_format(tmp_path: Path) -> None:
    """The error for an unknown suffix says to pass --format, so explain has it too."""
    dump = _dump(tmp_path, "ads.txt")
    code, _, err = run("explain", "0", "2", "--dump", str(dump))
    assert code == 2 and "--format" in err, err  # a flag to give, as for check
    code, out, err = run("explain", "0", "2", "--dump", str(dump), "--format", "tsv", "--json")
    assert code == 0 and json.loads(out)["duplicate"] is False, err


def test_a_dump_read_in_the_wrong_format_says_its_rows_could_not_be_read(
        tmp_path: Path) -> None:
    """It said only that the ids were not in the dump."""
    dump = _dump(tmp_path)
    code, _, err = run("explain", "0", "2", "--dump", str(dump), "--format", "jsonl")
    lines = len(dump.read_text().splitlines())
    assert code == 1 and f"{lines} of its {lines} rows could not be read: {lines} " \
        "malformed_json; is --format right?" in err, err
    code, _, err = run("explain", "0", "9", "--dump", str(dump),  # read well, 9 is not there
                       "--bootstrap-servers", "127.0.0.1:9")  # nor a broker for the topic
    assert code == 1 and err.strip().endswith(
        f"no announcement with id '9' in {dump} (topic jobs, where a streamed ad would be, "
        "not read: no Kafka broker answers at 127.0.0.1:9)"), err


def test_explain_from_the_store_says_when_its_settings_are_not_the_detectors(
        tmp_path: Path) -> None:
    """It explained with its own flags, silently: another preset than the store's read a
    duplicate as "not a duplicate" (the monitor's page already warned)."""
    text = ("Cerchiamo sviluppatore Java con esperienza in Spring e Hibernate per progetto "
            "bancario a Milano, contratto indeterminato.")
    dump = write_tsv(tmp_path / "ads.tsv", [["Sviluppatore Java", text, "Milano", "", "a"],
                                            ["Sviluppatore Java", text + " Inviare il CV.",
                                             "Milano", "", "b"]])
    store = str(tmp_path / "s")
    code, out, err = run("check", str(dump), "--store", store, "--preset", "default")
    assert code == 0 and json.loads(out.splitlines()[1])["duplicate_of"] == "0", err
    same = ["explain", "1", "--use-store", "--store", store, "--dump", str(dump), "--json"]
    code, out, err = run(*same, "--preset", "default")
    assert code == 0 and "warning" not in json.loads(out) and "warning" not in err, err
    code, out, err = run(*same, "--preset", "reference")
    assert code == 0 and "give explain the detector's --preset" in json.loads(out)["warning"]
    code, out, err = run(*same[:-1], "--preset", "reference")
    assert code == 0 and "warning: the store was built with other parameters (bands: " in err
    assert "; the detector measured Jaccard" in err, err
    # the same Jaccard, another threshold: "a duplicate" at 0.5 of a store built at 0.8
    code, out, err = run(*same, "--preset", "default", "--threshold", "0.5")
    assert code == 0 and "threshold: store has 0.8, settings give 0.5" in json.loads(out)[
        "warning"], err


def test_a_duplicate_of_the_cap_left_out_of_matches_is_still_checked(tmp_path: Path) -> None:
    """With ``--max-matches 1`` c's verdict lists b (its best) and names a (its earliest):
    explain took a from it and compared nothing, so other settings went unremarked."""
    base = ("Cerchiamo sviluppatore Java con esperienza in Spring e Hibernate per progetto "
            "bancario a Milano, contratto indeterminato, sede centrale, buona conoscenza "
            "della lingua inglese.")
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": i, "description": base + extra}) + "\n" for i, extra
                            in (("a", ""), ("b", " Inviare il CV."), ("c", " Inviare il CV."))))
    store = str(tmp_path / "s")
    code, out, err = run("check", str(dump), "--store", store, "--max-matches", "1")
    last = json.loads(out.splitlines()[2])
    assert code == 0 and last["duplicate_of"] == "a" and last["matches"][0]["id"] == "b", out
    same = ["explain", "c", "--use-store", "--store", store, "--dump", str(dump), "--json"]
    code, out, err = run(*same)
    assert code == 0 and "warning" not in json.loads(out), err
    code, out, err = run(*same, "--threshold", "0.99")
    assert code == 0 and "called this pair a duplicate" in json.loads(out)["warning"], err


def test_the_columns_stay_aligned_with_wide_characters() -> None:
    """Widths were counted in code points: on a 100-column terminal a CJK text's lines were
    199 columns wide, the separator at column 98 instead of 48."""
    import unicodedata

    from streamdedup.cli.explain import side_by_side

    def cells(line: str) -> int:
        return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)

    cjk = "招聘厨师 米兰餐厅 需要经验 " * 12
    rows = side_by_side("a", cjk, [(0, 4)], "b", "cuoco a milano " * 20, [], 100, False)
    for row in rows[2:]:
        left = row.split(" |")[0]
        assert cells(left) == 48, (cells(left), row)
    assert all(cells(row) <= 100 for row in rows)


def test_controls_in_the_texts_and_ids_are_written_out_and_the_columns_stay_aligned() -> None:
    """Normalized texts keep what normalization keeps: with --no-strip-punctuation an ESC
    reached the terminal, and each control took a column it did not fill."""
    from streamdedup.cli.explain import side_by_side

    left = "paga \x1b[2J mensile \u202e0005 euro " * 4
    rows = side_by_side("a\n1", left, [(0, 4)], "b", "paga mensile " * 10, [], 80, False)
    assert rows[0].startswith("a 1 ")
    assert not any(ch in row for row in rows for ch in "\x1b\u202e\n")
    assert "\\x1b[2J" in "".join(rows) and "\\u202e0005" in "".join(rows)
    assert {len(row.split(" |")[0]) for row in rows[2:]} == {38}


def test_an_id_sent_again_with_another_text_is_explained_as_it_was_judged(
        tmp_path: Path) -> None:
    """A=t1, A=t2, E=t2, A=t1: E is a duplicate of A (its text t2 then). explain took A's
    last text (t1), printed Jaccard 0.000 and blamed the settings."""
    t1, t2 = ADS[0][1], ADS[2][1]
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": i, "title": "", "description": t}) + "\n"
                            for i, t in (("A", t1), ("A", t2), ("E", t2), ("A", t1))),
                    encoding="utf-8")
    store = str(tmp_path / "s")
    code, out, err = run("check", str(dump), "--store", store)
    assert code == 0 and json.loads(out.splitlines()[2])["duplicate_of"] == "A", err
    code, out, err = run("explain", "E", "--use-store", "--store", store, "--dump", str(dump),
                         "--json")
    assert code == 0 and json.loads(out)["jaccard"] == 1.0, (out, err)
    assert "warning" not in err and "'A' has 2 different texts" in err, err


def test_flags_that_would_do_nothing_are_refused(tmp_path: Path) -> None:
    """--format without --dump, --use-store beside an OTHER_ID: taken, exit 0."""
    code, _, err = run("explain", "a", "b", "--format", "tsv", "--bootstrap-servers",
                       "127.0.0.1:9")
    assert code == 2 and "--format is the format of --dump FILE" in err, err
    code, _, err = run("explain", "0", "1", "--use-store", "--dump", str(_dump(tmp_path)))
    assert code == 2 and "give OTHER_ID or --use-store, not both" in err, err


def test_without_a_broker_it_names_the_ways_without_one(tmp_path: Path) -> None:
    """`explain 51 --dump d.tsv` read 51's verdict from the topic and said only that no
    broker answers, though the user had a dump and a store."""
    code, _, err = run("explain", "0", "--dump", str(_dump(tmp_path)),
                       "--bootstrap-servers", "127.0.0.1:9")
    assert code == 1 and "no Kafka broker answers" in err, err
    assert "or name OTHER_ID, or take it from the store with --use-store" in err, err
    # the texts too: `explain ID --use-store` (or two ids) without a broker did not say --dump
    code, _, err = run("explain", "0", "1", "--bootstrap-servers", "127.0.0.1:9")
    assert code == 1 and err.strip().endswith(
        "; or read the texts from a dump with --dump FILE"), err


def test_an_id_from_a_column_is_found_with_the_same_id_field(tmp_path: Path) -> None:
    """A store keyed by link (`check --id-field link`), explained from the dump without the
    flag: "no announcement with id 'l1'", nothing more."""
    dump = _dump(tmp_path)  # its links are l0, l1, l2
    code, out, err = run("explain", "l1", "l0", "--dump", str(dump), "--json")
    assert code == 1 and "give it here too" in err, err
    code, out, err = run("explain", "l1", "l0", "--dump", str(dump), "--json",
                         "--id-field", "link")
    assert code == 0 and json.loads(out)["jaccard"] == 1.0, err


def test_two_long_ids_that_share_their_start_can_be_told_apart(tmp_path: Path) -> None:
    """Two links of one site, cut at the column's width, showed the same 57 characters and
    nothing else named them."""
    site = "https://www.kijiji.it/annunci/offerta/milano-annunci-magenta/ingegnere/"
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": site + n, "title": ADS[0][0],
                                        "description": ADS[0][1]}) + "\n"
                            for n in ("52622326", "52622399")), encoding="utf-8")
    code, out, err = run("explain", site + "52622399", site + "52622326", "--dump",
                         str(dump), "--no-color", env={"COLUMNS": "120"})
    assert code == 0, err
    head = out.splitlines()[0]
    assert "52622399" in head.split(" | ")[0] and "52622326" in head.split(" | ")[1], head
    assert len(head.split(" | ")[0]) == (120 - 3) // 2
    assert f"left {site}52622399\nright {site}52622326" in out
