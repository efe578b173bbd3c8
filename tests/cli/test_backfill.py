"""`streamdedup backfill`: outputs, the store it keeps, its report, Ctrl-C, time order, Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from command_line import ADS, into_closed_pipe, run, write_tsv


def test_backfill_with_only_duplicates_writes_what_check_writes(tmp_path: Path) -> None:
    """backfill listed --only-duplicates and wrote every verdict."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--store-backend",
                       "memory", "--only-duplicates", "--out", str(tmp_path / "v.jsonl"))
    assert code == 0, err
    lines = (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(v)["id"] for v in lines] == ["1"]
    assert "3 documents, 1 duplicate," in err and "nothing kept (--store-backend memory)" in err


def test_a_backfill_of_which_no_row_can_be_judged_is_an_error(tmp_path: Path) -> None:
    """As check (above): every row a bad_time record, and backfill exited 0 having judged
    nothing."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "21 ottobre, 17:41", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    args = ["backfill", str(tsv), "--engine", "local", "--out", str(tmp_path / "v.jsonl")]
    code, _, err = run(*args, "--retention", "60d", "--store", str(tmp_path / "s"))
    assert code == 1 and "none was judged (the first: bad_time" in err, err
    assert "--time-field '' judges them without their times instead" in err  # as check says
    assert len((tmp_path / "v.errors.jsonl").read_text().splitlines()) == 3
    # the empty store it made, pinned to these settings, is gone: another preset may follow
    assert err.count("is not kept") == 1 and not (tmp_path / "s").exists(), err  # said once
    code, _, err = run(*args, "--store", str(tmp_path / "s"), "--preset", "reference")
    assert code == 0, err  # without retention the times are not read
    assert err.rstrip().endswith(f"; store: {tmp_path / 's'}"), err  # as check names it


def test_backfill_keeps_no_store_it_made_when_it_judged_nothing(tmp_path: Path) -> None:
    """A refusal after the store was opened (--report with repeated ids) left an empty
    store pinned to the run's settings; one that was there before is kept."""
    tsv = tmp_path / "ads.tsv"
    tsv.write_text("id\ttitle\tdescription\n" + "".join(f"same\t{t}\t{d}\n" for t, d in ADS),
                   encoding="utf-8")
    args = ["backfill", str(tsv), "--engine", "local", "--out", str(tmp_path / "v.jsonl"),
            "--report", str(tmp_path / "r"), "--store", str(tmp_path / "s")]
    code, _, err = run(*args)
    assert code == 1 and "ids are unique" in err and "is not kept" in err, err
    assert not (tmp_path / "s").exists()
    assert run("check", str(tsv), "--store", str(tmp_path / "s"), "--out",
               str(tmp_path / "c.jsonl"))[0] == 0
    code, _, err = run(*args)
    assert code == 1 and "is not kept" not in err and (tmp_path / "s").exists(), err


def test_backfill_out_dash_is_standard_output(tmp_path: Path) -> None:
    """It wrote a file named "-" (and "-.errors.jsonl"), where check's --out - is standard
    output; the bad rows go there too, before the verdicts, unless --errors is given."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)] + [["", "", "", "",
                                                                                "empty"]])
    code, out, err = run("backfill", str(tsv), "--engine", "local", "--store-backend",
                         "memory", "--out", "-")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line.get("error") for line in lines] == ["empty_text", None, None, None]
    assert [line.get("duplicate") for line in lines[1:]] == [False, True, False]
    assert not list(tmp_path.glob("-*")) and not Path("-").exists()
    code, out, err = run("backfill", str(tsv), "--engine", "local", "--store-backend",
                         "memory", "--out", "-", "--errors", str(tmp_path / "e.jsonl"))
    assert code == 0 and len(out.splitlines()) == 3, err
    assert "empty_text" in (tmp_path / "e.jsonl").read_text()


@pytest.mark.parametrize("buffered", [True, False])
def test_backfill_says_in_one_line_that_its_output_cannot_be_written(
        tmp_path: Path, buffered: bool) -> None:
    """A full disk under --out ended in a traceback, a closed pipe under `--out -` in exit 1
    without a word, and, with standard output buffered as in a shell, in exit 120 and
    Python's "Exception ignored" after the line; `check` says each in one line."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--out", "/dev/full",
                       "--errors", str(tmp_path / "e.jsonl"), "--store", str(tmp_path / "s"))
    assert code == 1 and "cannot write /dev/full: No space left on device" in err, err
    assert "Traceback" not in err and "holds 3 documents" in err, err  # committed
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--out", "/dev/full",
                       "--errors", str(tmp_path / "e.jsonl"), "--store-backend", "memory")
    assert code == 1 and err.strip().endswith(
        "No space left on device; nothing was kept (--store-backend memory)"), err
    code, said = into_closed_pipe("backfill", str(tsv), "--engine", "local", "--out", "-",
                                  "--store", str(tmp_path / "s2"), buffered=buffered)
    assert code == 1, said
    assert said.strip().splitlines()[-1].startswith(
        "Error: cannot write standard output: Broken pipe"), said
    assert "Traceback" not in said and "Exception ignored" not in said, said


def test_backfill_report_into_a_store_holding_documents_is_refused(tmp_path: Path) -> None:
    """The report's brute force sees this dump alone: a store holding an earlier dump made
    their matches false positives (precision 0.7149, with every verdict right). A store of
    this dump's own ads is what a resumed backfill finds, and its report is right."""
    rows = [[t, d, "Milano", "2020", f"l{i}"] for i, (t, d) in enumerate(ADS)]
    first = write_tsv(tmp_path / "a.tsv", rows[:2])
    rest = write_tsv(tmp_path / "b.tsv", [[*r[:4], f"m{i}"] for i, r in enumerate(rows[2:])])
    args = ["--engine", "local", "--store", str(tmp_path / "s")]
    assert run("backfill", str(first), *args, "--out", str(tmp_path / "a.jsonl"))[0] == 0
    code, _, err = run("backfill", str(rest), *args, "--out", str(tmp_path / "b.jsonl"),
                       "--report", str(tmp_path / "r"))
    assert code == 1 and "the store holds documents of others" in err, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "b.jsonl").exists()
    # A store of this dump's own (a backfill resumed after Ctrl-C, as it says) is fine.
    code, _, err = run("backfill", str(first), *args, "--out", str(tmp_path / "a2.jsonl"),
                       "--report", str(tmp_path / "r1"))
    assert code == 0 and (tmp_path / "r1" / "report.md").is_file(), err
    code, _, err = run("backfill", str(rest), "--engine", "local", "--store",
                       str(tmp_path / "new"), "--out", str(tmp_path / "b.jsonl"),
                       "--report", str(tmp_path / "r"))
    assert code == 0 and (tmp_path / "r" / "report.md").is_file(), err


def test_backfill_says_when_its_report_cannot_be_written_after_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report folder the up-front check let through (root on /proc) and the file system
    then refused ended the whole run in a traceback."""
    import errno

    import streamdedup.replay.report as report

    def full(_report: object, out_dir: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(out_dir) / "x.png"))

    monkeypatch.setattr(report, "write_report", full)
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--store",
                       str(tmp_path / "s"), "--out", str(tmp_path / "v.jsonl"), "--report",
                       str(tmp_path / "r"))
    assert code == 1 and "Traceback" not in err, err
    assert f"cannot write the report in {tmp_path / 'r'}: No space left on device" in err
    assert (tmp_path / "v.jsonl").read_text().count("\n") == 3


def test_backfill_in_time_order_needs_a_time_field(tmp_path: Path) -> None:
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--order-by", "timestamp",
                       "--time-field", "", "--store", str(tmp_path / "s"), "--out", "-")
    assert code == 2 and "--order-by timestamp needs a --time-field" in err, err
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--store",
                       str(tmp_path / "s"), "--out", "-")
    assert code == 0 and "(in -)" not in err and "bad rows (among the verdicts)" in err, err


def test_backfill_interrupted_says_how_far_it_got_and_exits_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C printed click's bare "Aborted!" and exit 1 (on Spark after ~80 lines of
    tracebacks). It is faked where the decisions start: what is tested is what the command
    says and that the store keeps what was committed (nothing, then all of a whole run)."""
    import streamdedup.replay.backfill as backfill

    real = backfill._decide

    def interrupted(detector: object, store: object, docs: list[object], *rest: object
                    ) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(backfill, "_decide", interrupted)
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    args = ["backfill", str(tsv), "--engine", "local", "--out", str(tmp_path / "v.jsonl"),
            "--store", str(tmp_path / "s")]
    code, _, err = run(*args)
    assert code == 130 and "interrupted; the store it started at" in err, err
    assert "is not kept" in err and "goes on from there" not in err, err  # it said both
    assert not (tmp_path / "s").exists()
    monkeypatch.setattr(backfill, "_decide", real)
    assert run(*args)[0] == 0
    code, _, err = run(*args, "--retention", "60d")  # the store holds 3 documents now
    assert code == 0, err
    verdicts = (tmp_path / "v.jsonl").read_text(encoding="utf-8")
    monkeypatch.setattr(backfill, "_decide", interrupted)
    code, _, err = run(*args, "--retention", "60d")
    assert code == 130 and "holds 3 documents" in err and "with --retention" in err, err
    assert (tmp_path / "s").exists()
    # stopped before its first verdict (a Spark that did not start, too): the last run's
    # verdicts are left whole, not emptied
    assert len(verdicts.splitlines()) == 3
    assert (tmp_path / "v.jsonl").read_text(encoding="utf-8") == verdicts


def test_backfill_interrupted_before_its_first_commit_keeps_no_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after documents were written but before the driver's first commit (it commits
    every 500): they were counted ("holds the 3 documents"), so the store was kept, empty."""
    from streamdedup.store.sqlite import SqliteStore

    real = SqliteStore.commit

    def interrupted(self: SqliteStore) -> None:
        if self.stats()["documents"]:  # written, not committed yet
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(SqliteStore, "commit", interrupted)
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("backfill", str(tsv), "--engine", "local", "--out",
                       str(tmp_path / "v.jsonl"), "--store", str(tmp_path / "s"))
    assert code == 130 and "interrupted; the store it started at" in err, err
    assert "is not kept" in err and "goes on" not in err, err
    assert not (tmp_path / "s").exists()


def test_backfill_orders_by_the_time_field_retention_reads(tmp_path: Path) -> None:
    """`backfill --order-by timestamp` sorted on its own --timestamp-field while retention read
    --time-field: two names, two defaults, so one run could sort by one field and expire by
    the other. The old name still works, and says so."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": i, "description": f"annuncio {i}",
                                        "posted": f"2026-11-0{9 - i}T00:00:00Z"}) + "\n"
                            for i in range(3)), encoding="utf-8")

    def ids(store: str, *flags: str) -> tuple[list[str], str]:
        out = tmp_path / f"{store}.jsonl"
        code, _, err = run("backfill", str(dump), "--engine", "local", "--order-by",
                           "timestamp", "--out", str(out), "--store", str(tmp_path / store),
                           *flags)
        assert code == 0, err
        return [json.loads(v)["id"] for v in out.read_text().splitlines()], err

    got, err = ids("a", "--time-field", "posted")
    assert got == ["2", "1", "0"] and "came last" not in err, err
    got, err = ids("b")  # no "timestamp" field: file order, and said
    assert got == ["0", "1", "2"] and "no row has a readable 'timestamp'" in err, err
    got, err = ids("c", "--timestamp-field", "posted")
    assert got == ["2", "1", "0"] and "--timestamp-field is now --time-field" in err, err
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out",
                       str(tmp_path / "d.jsonl"), "--store", str(tmp_path / "d"),
                       "--timestamp-field", "posted", "--time-field", "other")
    assert code == 2 and "old name of --time-field" in err, err


def test_a_spark_master_no_one_answers_at_is_one_line_before_the_store_is_made(
        tmp_path: Path) -> None:
    """It was a minute of the JVM's retries and stack traces, ending in "Cannot call methods
    on a stopped SparkContext", after the dump had been read and the store made."""
    from streamdedup.process import free_port

    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    master = f"spark://127.0.0.1:{free_port()}"
    code, _, err = run("backfill", str(tsv), "--engine", "spark", "--master", master,
                       "--out", str(tmp_path / "v.jsonl"), "--store", str(tmp_path / "s"))
    assert code == 1 and f"no Spark master answers at --master {master}" in err, err
    assert "Connection refused" in err and not (tmp_path / "s").exists()


def test_spark_flags_given_to_the_local_engine_are_refused(tmp_path: Path) -> None:
    """They were accepted and ignored, invalid values included (--partitions 0, --master
    bogus)."""
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "un annuncio", "Milano", "2020", "l"]])
    base = ["backfill", str(tsv), "--engine", "local", "--store-backend", "memory", "--out",
            str(tmp_path / "v.jsonl")]
    code, _, err = run(*base, "--master", "bogus", "--partitions", "0")
    assert code == 2 and "--master, --partitions apply only to --engine spark" in err, err
    code, _, err = run(*base)
    assert code == 0 and (tmp_path / "v.jsonl").read_text().count("\n") == 1, err


def test_a_dump_without_a_row_to_judge_does_not_start_spark(tmp_path: Path) -> None:
    """A header alone, or rows that are all bad, started Spark (10-12 s) to judge nothing."""
    header = write_tsv(tmp_path / "header.tsv", [])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n[1]\n', encoding="utf-8")
    for dump, code in ((header, 0), (bad, 1)):
        done, _, err = run("backfill", str(dump), "--engine", "spark", "--store-backend",
                           "memory", "--out", str(tmp_path / f"{dump.stem}.out.jsonl"))
        assert done == code and "starting Spark" not in err, err
        assert "0 documents" in err, err


@pytest.mark.parametrize(("name", "text", "code", "said"), [
    ("empty.tsv", "", 1, "is empty"),  # it left an empty v.errors.jsonl
    # it exited 1 and left v.errors.jsonl too; what it needs is a flag: exit 2
    ("ads.txt", "title\tdescription\nt\td\n", 2, "pass --format tsv, jsonl or parquet"),
])
def test_a_dump_it_cannot_judge_leaves_no_file_behind(tmp_path: Path, name: str, text: str,
                                                       code: int, said: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    argv = ("backfill", str(tmp_path / name), "--engine", "local", "--store",
            str(tmp_path / "s"), "--out", str(tmp_path / "v.jsonl"))
    got, _, err = run(*argv)
    assert got == code and said in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    # an earlier run's files are left as they were (its bad rows were deleted)
    for old in ("v.jsonl", "v.errors.jsonl"):
        (tmp_path / old).write_text(f"{old} of an earlier run\n", encoding="utf-8")
    got, _, err = run(*argv)
    assert got == code and said in err, err
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()
            if p.name != name} == {old: f"{old} of an earlier run\n"
                                   for old in ("v.jsonl", "v.errors.jsonl")}


def test_bad_rows_on_standard_output_are_said_to_be_there(tmp_path: Path) -> None:
    """With --out FILE --errors -, it said "1 bad rows (among the verdicts)", which were in
    the file while the bad rows went to standard output."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text(json.dumps({"id": "a", "title": ADS[0][0], "description": ADS[0][1]})
                    + "\n{not json\n", encoding="utf-8")
    code, out, err = run("backfill", str(dump), "--engine", "local", "--store",
                         str(tmp_path / "s"), "--out", str(tmp_path / "v.jsonl"), "--errors", "-")
    assert code == 0 and "1 bad row (on standard output)" in err, err
    assert [json.loads(line)["row"] for line in out.splitlines()] == [1]


@pytest.mark.parametrize("command", ["check", "backfill"])
def test_a_dump_of_a_header_and_no_row_keeps_no_store(tmp_path: Path, command: str) -> None:
    """It kept an empty store pinned to the run's settings: the next run with another
    --preset into it was refused ("num_perm: store has 128 ...")."""
    dump = write_tsv(tmp_path / "ads.tsv", [])
    code, _, err = run(command, str(dump), "--store", str(tmp_path / "s"),
                       *(["--engine", "local", "--out", str(tmp_path / "v.jsonl")]
                         if command == "backfill" else []))
    assert code == 0 and "0 documents" in err and "is not kept" in err, err
    assert not (tmp_path / "s").exists()
    assert run(command, str(dump), "--store", str(tmp_path / "s"), "--preset", "reference",
               *(["--engine", "local", "--out", str(tmp_path / "v.jsonl")]
                 if command == "backfill" else []))[0] == 0


@pytest.mark.parametrize("command", ["check", "backfill"])
def test_an_empty_store_is_refused_in_its_own_words(tmp_path: Path, command: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With --out x.jsonl it said "--out x.jsonl is in the store's directory ."."""
    monkeypatch.chdir(tmp_path)  # where an empty --store would put its files
    dump = write_tsv(tmp_path / "ads.tsv", [[ADS[0][0], ADS[0][1], "Milano", "2020", "l"]])
    code, _, err = run(command, str(dump), "--store", "", "--out", "x.jsonl",
                       *(["--engine", "local"] if command == "backfill" else []))
    assert code == 2 and "store must name a directory" in err, err


def test_backfill_says_what_retention_evicted_as_check_does(tmp_path: Path) -> None:
    """``check --retention`` said how many documents and sets left the window; ``backfill``
    said nothing of it."""
    import re

    dump = tmp_path / "ads.jsonl"
    def word(i: int) -> str:  # the normalization drops digits: the number in letters
        return "".join("abcdefghil"[int(c)] for c in f"{i:04}")

    dump.write_text("".join(json.dumps({"id": i, "description": f"annuncio {word(i)} " * 5,
                                        "timestamp": 1_790_000_000 + 3600 * i}) + "\n"
                            for i in range(1200)), encoding="utf-8")  # 50 days, by the hour
    said = {}
    for command in ("check", "backfill"):
        code, _, err = run(command, str(dump), "--retention", "3d", "--store",
                           str(tmp_path / command), "--out", str(tmp_path / f"{command}.jsonl"),
                           *(["--engine", "local"] if command == "backfill" else []))
        assert code == 0, err
        assert command == "check" or "1200 documents, 0 bad rows" in err  # as the summary
        found = re.search(r"retention 3d: (\d+) documents and (\d+) sets evicted", err)
        assert found, err
        said[command] = (int(found.group(1)), int(found.group(2)))
    # Each ad its own text, so its set leaves the window with it (one call may take the
    # document and the next its set, so the counts need not be equal).
    assert said["check"] == said["backfill"] and min(said["check"]) > 0, said


def test_an_interrupt_while_the_store_is_away_is_said_as_an_interrupt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count asked of the store at the end raised in a `finally`: Ctrl-C while Redis was
    away became Redis's error (exit 1), and a store that cannot count put it in the place
    of whatever had stopped the run."""
    import streamdedup.replay.backfill as backfill
    from streamdedup.errors import StoreUnavailableError
    from streamdedup.store.sqlite import SqliteStore

    real, gone = SqliteStore.stats, []

    def interrupted(*_args: object) -> None:
        gone.append(True)  # the store goes away, then Ctrl-C
        raise KeyboardInterrupt

    def away(self: SqliteStore) -> dict[str, int]:
        if gone:
            raise StoreUnavailableError("Redis: ConnectionError: refused")
        return real(self)

    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    args = ["backfill", str(tsv), "--engine", "local", "--out", str(tmp_path / "v.jsonl"),
            "--store", str(tmp_path / "s")]
    assert run(*args)[0] == 0  # the store holds 3 documents
    monkeypatch.setattr(backfill, "_decide", interrupted)
    monkeypatch.setattr(SqliteStore, "stats", away)
    code, _, err = run(*args)
    assert code == 130 and "interrupted;" in err and "Redis" not in err, err
    # what the store cannot count is not said as its count ("holds 0 documents")
    assert "; the 0 documents this run committed are in the store" in err, err
