"""The command line: `run`, `scurve`, settings from flags and the environment, every
command's help, and what several commands share."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from command_line import ADS, into_closed_pipe, run, write_tsv

from streamdedup.cli.main import main


@pytest.mark.parametrize(("args", "message"), [
    (["--stopwords", "xx"], "--stopwords (or STREAMDEDUP_STOPWORDS): no stopword list for "
                            "language 'xx'"),
    (["--stopwords", "/no/such/words.txt"], "cannot read stopword file"),
    (["--stem-language", "klingon"], "--stem-language (or STREAMDEDUP_STEM_LANGUAGE): no "
                                     "Snowball stemmer for 'klingon'"),
])
def test_a_setting_found_wrong_when_used_exits_2_like_one_refused_at_parsing(
        tmp_path: Path, args: list[str], message: str) -> None:
    """They exited 1, where every other bad value exits 2."""
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    code, _, err = run("check", str(tsv), "--store", str(tmp_path / "s"), "--out",
                       str(tmp_path / "v.jsonl"), *args)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and message in err, err


def test_environment_and_flags_configure_settings(tmp_path: Path) -> None:
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"] for t, d in ADS])
    env = {"STREAMDEDUP_TEXT_FIELDS": "title", "STREAMDEDUP_STORE_BACKEND": "memory"}
    code, stdout, _ = run("check", str(tsv), env=env)
    assert code == 0
    # By title alone the two Java ads are equal, and the Linux ad is not.
    assert [json.loads(line)["duplicate"] for line in stdout.splitlines()] == [
        False, True, False]
    code, stdout, _ = run("check", str(tsv), "--text-fields", "description", env=env)
    assert [json.loads(line)["shingles"] for line in stdout.splitlines()][2] > 50


@pytest.mark.parametrize("env,args,said", [
    ({"STREAMDEDUP_NUM_PERM": "0"}, [], "Error: STREAMDEDUP_NUM_PERM must be >= 1, not 0"),
    ({"STREAMDEDUP_NUM_PERM": "abc"}, [], "Error: STREAMDEDUP_NUM_PERM: expected int"),
    ({"STREAMDEDUP_NUM_PERM": "0"}, ["--num-perm", "0"], "Error: --num-perm must be >= 1"),
    ({}, ["--store-backend", "bogus"], "Error: --store-backend must be 'sqlite'"),
    # every setting a message names, by its origin (the field's name, under the usage text)
    ({"STREAMDEDUP_OUTPUT_TOPIC": "jobs"}, [],
     "Error: input_topic 'jobs' must differ from STREAMDEDUP_OUTPUT_TOPIC and dlq_topic"),
    ({"STREAMDEDUP_PRESET": "nope"}, [], "Error: unknown STREAMDEDUP_PRESET 'nope'"),
    ({"STREAMDEDUP_BANDS": "300"}, ["--rows", "5"],
     "Error: STREAMDEDUP_BANDS x --rows = 1500 exceeds num_perm = 128"),
    # flags alone: the setting to give as well is named as a flag ("--bands and rows")
    ({}, ["--bands", "7"], "Error: give both --bands and --rows, or neither"),
    # a flag the message already spells stays as it is (it was "----retention")
    ({}, ["--retention", "60d", "--store-backend", "redis", "--redis-url", "redis://x",
          "--redis-cluster"], "Error: --retention on Redis takes one server"),
    # a Redis flag on another backend was ignored (backfill wrote into ./streamdedup-store)
    ({}, ["--redis-url", "redis://x"],
     "Error: --redis-url is for --store-backend redis, and the store here is 'memory'"),
    # and a store directory on another backend was taken without a word
    ({}, ["--store", "mine"], "Error: --store is a SQLite store's directory, and the store "
                              "here is 'memory'"),
    ({}, ["--store-backend", "redis", "--redis-url", "redis://127.0.0.1:9/0", "--store",
          "mine"], "Error: --store is a SQLite store's directory, and the store here is "
                   "'redis'"),
    ({}, ["--text-fields", "title,title"], "Error: --text-fields names 'title' twice"),
])
def test_a_refused_value_is_named_by_where_it_came_from(
        tmp_path: Path, env: dict[str, str], args: list[str], said: str) -> None:
    """A variable's value was said by its field's name under the command's usage text, as
    if a flag were wrong; now the variable is named, in one line, and a flag as before."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"] for t, d in ADS])
    code, _, err = run("check", str(tsv), "--store-backend", "memory", *args, env=env)
    assert code == 2 and said in err and "---" not in err
    assert ("Usage:" in err) == bool(args)


@pytest.mark.parametrize("command", [["tail", "--count", "1"], ["produce", "ads.tsv"]])
def test_a_redis_flag_on_a_command_without_a_store_is_taken_without_effect(
        tmp_path: Path, command: list[str]) -> None:
    """As every flag a command does not read (one environment or script serves them all);
    the refusal of a Redis flag on another backend is for the commands that open a store
    (it stopped tail and produce, which have none, in a user's journey)."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"] for t, d in ADS])
    argv = [str(tsv) if a == "ads.tsv" else a for a in command]
    code, _, err = run(*argv, "--bootstrap-servers", "127.0.0.1:1", "--redis-url",
                       "redis://x", "--redis-cluster")
    assert code == 1 and "no Kafka broker answers at 127.0.0.1:1" in err
    assert "--redis" not in err


def test_a_store_flag_on_another_backend_is_taken_where_no_store_is_opened(
        tmp_path: Path) -> None:
    """`explain` without --use-store opens no store, so its --store (from a shared
    environment) is no mistake there; it is refused with --use-store."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": str(i), "title": t, "description": d}) + "\n"
                            for i, (t, d) in enumerate(ADS)), encoding="utf-8")
    args = ["explain", "0", "1", "--dump", str(dump), "--store-backend", "memory", "--store",
            str(tmp_path / "s")]
    code, out, err = run(*args)
    assert code == 0 and "SQLite store's directory" not in err and "Jaccard" in out, err
    code, _, err = run(*args, "--use-store")
    assert code == 2 and "--store is a SQLite store's directory" in err, err


def test_scurve_writes_a_png_and_prints_the_value_at_the_threshold(tmp_path: Path) -> None:
    out = tmp_path / "s.png"
    code, stdout, _ = run("scurve", "--bands", "20", "--rows", "5", "--threshold", "0.8",
                          "--out", str(out))
    assert code == 0
    assert "20 bands x 5 rows: P(candidate | s=0.8) = 0.999644" in stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, stdout, _ = run("scurve", "--threshold", "0.8", "--num-perm", "128",
                          "--out", str(out))
    assert "25 bands x 5 rows" in stdout
    assert run("scurve", "--bands", "3", "--out", str(out))[0] != 0
    # a flag not given was named ("num_perm must be <= 1024, not 1500")
    code, _, err = run("scurve", "--bands", "300", "--rows", "5", "--out", str(out))
    assert code == 2 and "--bands x --rows must be <= 1024" in err and "num_perm" not in err


@pytest.mark.parametrize("command,flag", [("backfill", "--report"), ("replay", "--report-dir"),
                                          ("backfill", "--report-dir"), ("replay", "--report")])
def test_a_report_directory_that_cannot_be_made_is_refused_before_the_run(
        tmp_path: Path, command: str, flag: str) -> None:
    """backfill judged the whole dump and wrote its store, then ended in a traceback
    (NotADirectoryError); replay ran to its end before "cannot use". Either command takes
    the other's spelling of the flag."""
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    (tmp_path / "afile").write_text("x")
    report = str(tmp_path / "afile" / "sub")
    if command == "backfill":
        args = ["backfill", str(tsv), "--engine", "local", "--out", str(tmp_path / "v.jsonl"),
                "--store", str(tmp_path / "s"), flag, report]
    else:
        args = ["replay", "--dump", str(tsv), flag, report,
                "--bootstrap-servers", "127.0.0.1:9"]
    code, _, err = run(*args)
    assert code == 2 and f"{tmp_path / 'afile'} is not a directory" in err, err
    assert not (tmp_path / "s").exists() and not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--threshold", "2"], "threshold must be in (0, 1]"),
    (["--threshold", "0"], "threshold must be in (0, 1]"),
    (["--num-perm", "-5"], "--num-perm must be >= 1"),
    (["--num-perm", "0"], "--num-perm must be >= 1"),  # was ignored: the default's plot
    (["--num-perm", "100000000"], "--num-perm must be <= 1024"),
    (["--bands", "30", "--rows", "5", "--num-perm", "128"], "exceeds --num-perm"),
])
def test_scurve_refuses_what_the_settings_refuse(tmp_path: Path, args: list[str],
                                                 says: str) -> None:
    """These were tracebacks, or silently the default's curve."""
    code, _, err = run("scurve", *args, "--out", str(tmp_path / "s.png"))
    assert code == 2 and says in err and not (tmp_path / "s.png").exists(), err


def test_scurve_reads_the_settings_as_every_command_does(tmp_path: Path) -> None:
    """It took its four flags alone: under STREAMDEDUP_PRESET=reference it drew the default
    preset's curve (25 x 5) without a word."""
    out = str(tmp_path / "s.png")
    for args, env in (([], {"STREAMDEDUP_PRESET": "reference"}), (["--preset", "reference"], {})):
        code, stdout, err = run("scurve", *args, "--out", out, env=env)
        assert code == 0 and "20 bands x 5 rows: P(candidate | s=0.8)" in stdout, err
    code, stdout, err = run("scurve", "--out", out, env={"STREAMDEDUP_THRESHOLD": "0.9"})
    assert code == 0 and "16 bands x 8 rows: P(candidate | s=0.9)" in stdout, err
    code, _, err = run("scurve", "--out", out, env={"STREAMDEDUP_NUM_PERM": "x"})
    assert code == 2 and "STREAMDEDUP_NUM_PERM" in err, err
    # bands and rows alone still take the rows they need, past the variable's num_perm too
    code, stdout, err = run("scurve", "--bands", "32", "--rows", "8", "--out", out,
                            env={"STREAMDEDUP_NUM_PERM": "64"})
    assert code == 0 and "32 bands x 8 rows" in stdout, err


def test_scurve_of_bands_and_rows_alone_takes_the_rows_it_needs(tmp_path: Path) -> None:
    code, stdout, err = run("scurve", "--bands", "32", "--rows", "8", "--out",
                            str(tmp_path / "s.png"))
    assert code == 0 and "32 bands x 8 rows" in stdout, err


def test_scurve_refuses_a_file_name_matplotlib_cannot_write(tmp_path: Path) -> None:
    """It was a ValueError traceback once the curve was drawn."""
    code, _, err = run("scurve", "--out", str(tmp_path / "sc.txt"))
    assert code == 2 and "matplotlib writes" in err and "not .txt" in err, err
    assert not (tmp_path / "sc.txt").exists()
    code, _, err = run("scurve", "--out", str(tmp_path / "sc.SVG"))
    assert code == 0 and (tmp_path / "sc.SVG").read_bytes().lstrip().startswith(b"<?xml"), err


@pytest.mark.parametrize("out", ["", "-"])
def test_scurve_refuses_an_out_that_names_no_file(out: str) -> None:
    """'' was a ValueError traceback ("PosixPath('.') has an empty name"); - wrote -.png."""
    code, _, err = run("scurve", "--out", out)
    assert code == 2 and "give an image file's name" in err, err


def test_scurve_says_in_one_line_that_the_file_system_refused_its_file(tmp_path: Path) -> None:
    """A place the file system refuses once the plot is written (/proc, even for root) was a
    FileNotFoundError traceback."""
    code, _, err = run("scurve", "--out", "/proc/streamdedup-scurve.png")
    assert code == 1 and err.strip().startswith("Error: cannot write /proc/"), err


def test_scurve_names_the_file_it_wrote(tmp_path: Path) -> None:
    """matplotlib adds .png to a name without a suffix; the message said the name given."""
    code, stdout, _ = run("scurve", "--out", str(tmp_path / "plot"))
    assert code == 0 and f"plot written to {tmp_path / 'plot.png'}" in stdout
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_run_stops_cleanly_on_sigterm_while_the_broker_is_unreachable(tmp_path: Path) -> None:
    """At once, even after the client's bootstrap wait has grown: it doubles at each failed
    try (2, 4, 8 s ... up to 30), and SIGTERM used to wait for the try in hand, then make
    one more: 13 s after a minute without a broker, 28 s with kafka-python's own wait. After
    two failed tries the next waits 8 s; the stop must not."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamdedup", "run", "--bootstrap-servers", "127.0.0.1:9",
         "--store", str(tmp_path / "s"), "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    assert proc.stdout is not None
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while sum(b"topic creation failed" in line for line in seen) < 2:
        assert time.monotonic() < deadline, b"".join(seen).decode()[-2000:]
        seen.append(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    try:
        rest, _ = proc.communicate(timeout=6)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
        raise AssertionError("SIGTERM waited for the broker's next bootstrap try: "
                             + (b"".join(seen) + rest).decode()[-3000:]) from None
    out = b"".join(seen) + rest
    assert proc.returncode == 0, out.decode()[-2000:]
    assert b"Traceback" not in out
    assert b"nothing consumed yet, stopping" in out
    assert b"stopped before the broker could be reached" in out


def test_run_with_a_metrics_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    """Issue 17: two consumers on one host with the default port used to give a traceback."""
    import os
    import socket
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "streamdedup", "run", "--bootstrap-servers", "127.0.0.1:9",
             "--store", str(tmp_path / "s"), "--metrics-port", str(port)],
            capture_output=True, text=True, env=env, timeout=60,
        )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in proc.stderr
    assert "give each its own --metrics-port" in proc.stderr


@pytest.mark.parametrize(("host", "said"), [("0.0.0.0", "0.0.0.0"), ("", "every address")])
def test_run_warns_when_metrics_are_bound_beyond_loopback(tmp_path: Path, host: str,
                                                          said: str) -> None:
    """'' said "served on , reachable from other hosts"."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamdedup", "run", "--bootstrap-servers", "127.0.0.1:9",
         "--store", str(tmp_path / "s"), "--metrics-host", host, "--metrics-port",
         str(_free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()[-2000:]
    assert f"served on {said}, reachable from other hosts".encode() in out


def _free_port() -> int:
    from streamdedup.process import free_port

    return free_port()


def test_no_command_declares_an_option_twice() -> None:
    """A command's own flag and a Settings flag of the same name (tail's --only-duplicates)
    made click warn on every run; each command's options are unique."""
    import click

    def commands(group: click.Group, path: list[str]) -> list[list[str]]:
        out = []
        for name, cmd in group.commands.items():
            out.append([*path, name])
            if isinstance(cmd, click.Group):
                out += commands(cmd, [*path, name])
        return out

    for path in commands(main, []):
        cmd: click.Command = main
        for name in path:
            assert isinstance(cmd, click.Group)
            cmd = cmd.commands[name]
        flags = [opt for p in cmd.params for opt in p.opts if opt.startswith("--")]
        assert len(flags) == len(set(flags)), (path, sorted(f for f in flags
                                                             if flags.count(f) > 1))


@pytest.mark.parametrize("command", ["backfill", "replay"])
def test_replay_and_backfill_flags_default_to_their_configs_fields(command: str) -> None:
    """The defaults are written once, in ``replay/config.py``; a flag that repeats one by hand
    drifts from the config the library's callers get."""
    import dataclasses

    from streamdedup.replay.config import BackfillConfig, ReplayConfig

    config = {"backfill": BackfillConfig, "replay": ReplayConfig}[command]
    defaults = {f.name: f.default for f in dataclasses.fields(config)
                if f.default is not dataclasses.MISSING and f.default is not None}
    params = {p.name: p.default for p in main.commands[command].params}
    shared = sorted(set(defaults) & set(params))
    assert len(shared) >= 3, shared  # the flags that carry a config field's name
    assert {name: params[name] for name in shared} == {name: defaults[name] for name in shared}


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_a_tsv_of_row_numbers_into_a_store_with_documents_is_warned_of(
        tmp_path: Path, command: list[str]) -> None:
    """Two days' dumps without an id column: day 2's row 0 replaced day 1's document "0"."""
    store = ["--store", str(tmp_path / "s")]

    def tsv(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text, encoding="utf-8")
        return tmp_path / name

    day1 = tsv("day1.tsv", "title\tdescription\nJava developer\tMilano\nPizzaiolo\tNapoli\n")
    day2 = tsv("day2.tsv", "title\tdescription\nData analyst\tTorino, part time\n")

    def judge(dump: Path, n: int) -> str:
        out = ["--out", str(tmp_path / f"v{n}.jsonl")]
        code, _, err = run(*command[:1], str(dump), *command[1:], *out, *store)
        assert code == 0, err
        return err

    assert "no id column" not in judge(day1, 1)  # an empty store: nothing to replace
    said = judge(day2, 2)
    assert "day2.tsv has no id column" in said and "already holds 2 documents" in said
    with_ids = tsv("day3.tsv", "id\ttitle\tdescription\nd3-0\tCuoco\tRoma\n")
    assert "no id column" not in judge(with_ids, 3)
    assert "--id-field link" in said  # the way to keep both, without rewriting the dumps


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_ids_from_a_column_into_a_store_of_row_numbers_are_warned_of(
        tmp_path: Path, command: list[str]) -> None:
    """The Kijiji dump judged as it is, then again with ``--id-field link``: each of its ads
    was flagged as a duplicate of its own row number, without a word."""
    dump = tmp_path / "day.tsv"
    dump.write_text("title\tdescription\tlink\nJava developer\tMilano\thttps://a/1\n"
                    "Pizzaiolo\tNapoli\thttps://a/2\n", encoding="utf-8")
    numbered = tmp_path / "numbered.tsv"  # ids of its own, numbers from 0 as the store's
    numbered.write_text("id\ttitle\tdescription\n0\tJava developer\tMilano\n",
                        encoding="utf-8")

    def judge(n: int, *more: str) -> str:
        out = ["--out", str(tmp_path / f"v{n}.jsonl"), "--store", str(tmp_path / "s")]
        code, _, err = run(*command[:1], *more[:1], *command[1:], *out, *more[1:])
        assert code == 0, err
        return err

    judge(1, str(dump))
    said = judge(2, str(dump), "--id-field", "link")
    assert "holds documents named 0, 1" in said and "column 'link'" in said, said
    assert "without --id-field" in said
    assert "documents named" not in judge(3, str(numbered))
    later = tmp_path / "later.tsv"  # the next day's dump, its ids going on from the first's
    later.write_text("id\ttitle\tdescription\n1500\tCuoco\tRoma\n", encoding="utf-8")
    assert "documents named" not in judge(5, str(later))
    assert "documents named" not in judge(4, str(dump))  # row numbers again: as before


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_id_field_names_the_column_that_holds_the_ids(tmp_path: Path, command: list[str]
                                                      ) -> None:
    """Dumps without an id column (the Kijiji dump has none) kept one day's ads of two: the
    ids were row numbers. ``--id-field link`` reads each ad's link as its id instead."""
    def tsv(name: str, rows: str) -> Path:
        (tmp_path / name).write_text("title\tdescription\tlink\n" + rows, encoding="utf-8")
        return tmp_path / name

    day1 = tsv("day1.tsv", "Java developer\tMilano, full time\thttps://a/1\n"
                           "Pizzaiolo\tNapoli, sera\thttps://a/2\n")
    day2 = tsv("day2.tsv", "Data analyst\tTorino, part time\thttps://a/3\n"
                           "Pizzaiolo\tNapoli, sera\thttps://a/4\n")
    store = ["--store", str(tmp_path / "s"), "--id-field", "link"]
    verdicts = []
    for n, dump in enumerate((day1, day2)):
        out = tmp_path / f"v{n}.jsonl"
        code, _, err = run(*command[:1], str(dump), *command[1:], "--out", str(out), *store)
        assert code == 0 and "no id column" not in err, err
        verdicts += [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["id"] for v in verdicts] == [f"https://a/{i}" for i in (1, 2, 3, 4)]
    assert verdicts[3]["duplicate_of"] == "https://a/2"  # day 2's repost of day 1's ad
    code, out, _ = run("store", "stats", "--store", str(tmp_path / "s"), "--json")
    assert code == 0 and json.loads(out)["documents"] == 4  # day 2 replaced none of day 1
    code, _, err = run(*command[:1], str(day1), *command[1:], "--store-backend", "memory",
                       "--id-field", "ref", "--out", str(tmp_path / "x.jsonl"))
    assert code == 1 and "header has no column 'ref' to read the ids from" in err, err


@pytest.mark.parametrize(("command", "shown", "hidden"), [
    (["check"], ["--store", "--threshold", "--retention", "--only-duplicates"],
     ["--bootstrap-servers", "--metrics-port", "--monitor-port", "--input-topic"]),
    (["tail"], ["--bootstrap-servers", "--output-topic", "--ssl-cafile"],
     ["--store", "--threshold", "--metrics-port"]),
    (["store", "stats"], ["--store", "--redis-url"], ["--bootstrap-servers", "--threshold"]),
    (["run"], ["--store", "--bootstrap-servers", "--metrics-port", "--threshold"], []),
    (["replay"], ["--store", "--bootstrap-servers", "--threshold", "--input-topic"],
     ["--retention", "--time-field", "--only-duplicates", "--monitor-port",
      "--topic-partitions"]),
])
def test_a_commands_help_shows_the_settings_it_reads(command: list[str], shown: list[str],
                                                    hidden: list[str]) -> None:
    """Every command listed all ~60 settings flags, most without effect there (Kafka's on
    check, the detector's on tail); the others are still taken, so a shared environment or
    script keeps working."""
    code, out, _ = run(*command, "--help")
    assert code == 0
    flags = set(re.findall(r"--[a-z][a-z-]+", out))
    assert set(shown) <= flags and not set(hidden) & flags, sorted(flags)


def test_the_command_list_says_each_command_whole() -> None:
    """Most commands' lines in `streamdedup --help` were cut at "..." mid-sentence."""
    code, out, _ = run("--help")
    commands = out[out.index("Commands:"):].splitlines()[1:]
    assert code == 0 and len(commands) == len(main.commands) == 10
    assert not [c for c in commands if c.rstrip().endswith("...")], commands
    assert "--preset" not in run("store", "stats", "--help")[1]  # nothing there reads it


def test_a_flag_left_out_of_a_commands_help_is_still_taken(tmp_path: Path) -> None:
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                           for i, (t, d) in enumerate(ADS)])
    code, _, err = run("check", str(tsv), "--store", str(tmp_path / "s"), "--out",
                       str(tmp_path / "v.jsonl"), "--bootstrap-servers", "kafka:9092")
    assert code == 0, err


def test_version_names_the_package() -> None:
    """For bug reports and deployments: the version is also in `run`'s starting line."""
    from streamdedup import __version__

    for flag in ("--version", "-V"):
        done = CliRunner().invoke(main, [flag])
        assert done.exit_code == 0 and done.output == f"streamdedup {__version__}\n"


def test_every_command_ends_alike_on_a_signal_and_on_a_closed_pipe(tmp_path: Path) -> None:
    """Click said "Aborted!" with exit 1 (a failure's status) for Ctrl-C in `tail`,
    `explain` and `store verify`, SIGTERM ended `produce` without a word, and a reader that
    closed the pipe made `store stats` exit 1 without a word: now 130 and one line, and 141
    quietly, for every command."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    def started(*args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "streamdedup", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    with socket.socket() as silent:  # takes connections and never answers: tail waits
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        for sig in (signal.SIGINT, signal.SIGTERM):
            proc = started("tail", "--bootstrap-servers", f"127.0.0.1:{silent.getsockname()[1]}")
            time.sleep(3)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 130 and err.decode().strip() == "interrupted", err

    code, _, err = run("check", str(write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"]
                                                                     for t, d in ADS])),
                       "--store", str(tmp_path / "s"), "--out", str(tmp_path / "v.jsonl"))
    assert code == 0, err
    for buffered in (True, False):  # its first line meets a closed pipe
        assert into_closed_pipe("store", "stats", "--store", str(tmp_path / "s"),
                                buffered=buffered) == (141, "")


@pytest.mark.parametrize("args", [["tail"], ["explain", "a", "b"], ["produce", "DUMP"]])
def test_a_command_that_reads_or_writes_kafka_says_at_once_that_no_broker_answers(
        tmp_path: Path, args: list[str]) -> None:
    """They retried for 30 s, then said "KafkaTimeoutError: Unable to bootstrap"; `replay`
    asked first and said it in a second."""
    dump = write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"] for t, d in ADS])
    args = [str(dump) if a == "DUMP" else a for a in args]
    code, _, err = run(*args, "--bootstrap-servers", "127.0.0.1:9")
    assert code == 1 and err.strip() == (
        "Error: no Kafka broker answers at 127.0.0.1:9; pass the address of a running one "
        "with --bootstrap-servers (from a checkout, `scripts/kafka-local start` starts one, "
        "and `python scripts/replay.py` starts and stops its own)"
        + ("; or read the texts from a dump with --dump FILE" if args[0] == "explain"
           else "")), err


def test_tail_refuses_a_bad_from_before_it_asks_for_a_broker() -> None:
    """`tail --from garbage` said that no broker answers (exit 1) when none did, and named
    --from (exit 2) only when one did."""
    code, _, err = run("tail", "--from", "garbage", "--bootstrap-servers", "127.0.0.1:9")
    assert code == 2 and "--from" in err and "broker" not in err, err


def _json_lines(text: str) -> list[dict[str, object]]:
    """Each line of a stream that --log-json made: one JSON object, or the test fails."""
    return [json.loads(line) for line in text.splitlines()]


def test_with_log_json_the_error_that_stops_run_is_a_json_line_too(tmp_path: Path) -> None:
    """A log collector reading one JSON object a line got "Error: cannot serve metrics ..."
    as plain text, after JSON lines; now the last record says it, with the exit status."""
    import os
    import socket
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = subprocess.run(
            [sys.executable, "-m", "streamdedup", "run", "--bootstrap-servers", "127.0.0.1:9",
             "--store", str(tmp_path / "s"), "--metrics-port", str(busy.getsockname()[1]),
             "--log-json"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    last = _json_lines(proc.stderr)[-1]
    assert (last["level"], last["exit_code"]) == ("error", 2)
    assert "cannot serve metrics" in str(last["msg"])


@pytest.mark.parametrize("command", ["run", "monitor"])
@pytest.mark.parametrize("json_from", ["flag", "variable"])
def test_with_log_json_a_variables_bad_value_is_a_json_line_too(command: str,
                                                                json_from: str) -> None:
    """``STREAMDEDUP_NUM_PERM=x`` stopped them with a plain "Error: ..." although the logs
    were asked for as JSON."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    env["STREAMDEDUP_NUM_PERM"] = "x"
    env["STREAMDEDUP_BOGUS"] = "1"  # its warning, held until the format is known, too
    flags = ["--log-json"] if json_from == "flag" else []
    if json_from == "variable":
        env["STREAMDEDUP_LOG_JSON"] = "true"
    proc = subprocess.run([sys.executable, "-m", "streamdedup", command, *flags],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    records = _json_lines(proc.stderr)
    assert len(records) == len(proc.stderr.strip().splitlines()) == 2, proc.stderr
    assert "STREAMDEDUP_BOGUS is not a setting" in str(records[0]["msg"])
    assert (records[1]["exit_code"], records[1]["msg"]) == (
        2, "STREAMDEDUP_NUM_PERM: expected int, got 'x'")


def test_with_log_json_an_unexpected_error_in_run_is_one_json_record_with_its_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from streamdedup.service.consumer import Service

    def crash(self: Service) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Service, "__init__", lambda self, *a, **k: None)
    monkeypatch.setattr(Service, "run", crash)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        result = CliRunner().invoke(main, ["run", "--log-json"], env={})
        plain = CliRunner().invoke(main, ["run"], env={})
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    assert result.exit_code == 1
    record = _json_lines(result.stderr)[-1]
    assert (record["level"], record["exit_code"]) == ("critical", 1)
    assert "RuntimeError: a bug" in str(record["exc"])
    assert isinstance(plain.exception, RuntimeError)  # without it: Python's own traceback


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_a_dump_in_another_encoding_is_named_as_such(tmp_path: Path, command: list[str]
                                                      ) -> None:
    """A dump saved as Windows-1252: each row with an accented letter was a not_utf8 bad
    row, and the run ended with exit 0 and "3 bad rows" alone."""
    dump = tmp_path / "ads.tsv"
    dump.write_bytes("title\tdescription\nCameriere\tCaffè in centro\nCuoco\tPiù turni\n"
                     "Sarto\tsenza accenti\nBarista\tCittà\n".encode("cp1252"))
    out = ["--out", str(tmp_path / "v.jsonl"), "--store-backend", "memory"]
    code, _, err = run(*command[:1], str(dump), *command[1:], *out)
    assert code == 0 and "3 of 4 rows of" in err and "iconv -f windows-1252" in err, err
    dump.write_bytes(b"title\tdescription\n" + b"Sarto\tsenza accenti\n" * 30
                     + "Cuoco\tPiù turni\n".encode("cp1252"))  # one stray row in 31
    code, _, err = run(*command[:1], str(dump), *command[1:], *out)
    assert code == 0 and "not UTF-8" not in err, err


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_a_store_linked_to_nothing_is_refused_without_a_word_of_a_store_started(
        tmp_path: Path, command: list[str]) -> None:
    """It ended "; the store it started at lnk is not kept", where nothing was started."""
    tsv = write_tsv(tmp_path / "ads.tsv", [[t, d, "a", "b", "c"] for t, d in ADS])
    link = tmp_path / "lnk"
    link.symlink_to(tmp_path / "volume" / "gone")
    code, _, err = run(*command[:1], str(tsv), *command[1:], "--store", str(link),
                       "--out", str(tmp_path / "v.jsonl"))
    assert code == 1 and "which is not there (a volume not mounted?)" in err, err
    assert "not kept" not in err and link.is_symlink()
