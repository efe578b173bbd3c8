"""`streamdedup replay` around the replay itself: bad flags, Ctrl-C, its store from its flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from command_line import run, write_tsv


def captured(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The configs the replay command hands to the replay, faked to stop there (Ctrl-C)."""
    import streamdedup.replay.runner as runner

    got: list[object] = []

    def capture(config: object, *args: object) -> None:
        got.append(config)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "replay", capture)
    return got


@pytest.mark.parametrize(("args", "message"), [
    (["--rate", "-1"], "--rate"), (["--timeout", "0"], "--timeout"),
    # NaN passed click's ranges: a whole replay, then "500 ids missing within nan s"
    (["--rate", "nan"], "must be 0 (no limit) or at least 1/3600 (one message an hour), "
                        "not nan"),
    (["--timeout", "nan"], "--timeout must be a number of seconds > 0, not nan"),
    # the production topics and group, with a consumer of the replay's own
    (["--topic-prefix", ""], "--topic-prefix '' runs the replay's consumer on the settings'"),
    (["--topic-prefix", "bad prefix"], "--topic-prefix must be letters, digits, '.', '_' or "
                                       "'-' (it starts the replay's topic and group names), "
                                       "not 'bad prefix'"),
    (["--topic-prefix", "p" * 201], "--topic-prefix must be letters, digits, '.', '_' or '-'")])
def test_replay_refuses_a_negative_rate_and_no_timeout(tmp_path: Path, args: list[str],
                                                       message: str) -> None:
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    code, _, err = run("replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r"), *args)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_replay_refuses_retention_whose_forgetting_its_report_would_count_as_misses(
        tmp_path: Path) -> None:
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    code, _, err = run("replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r"),
                       "--retention", "1d", "--bootstrap-servers", "127.0.0.1:9")
    assert code == 2 and "drop --retention" in err and not (tmp_path / "r").exists(), err


def test_replay_interrupted_says_so_and_exits_130(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C printed click's bare "Aborted!" and exit 1, where check and produce exit 130
    and say where they stopped. (The replay itself is faked: what is tested is the command
    around it.)"""
    import streamdedup.replay.runner as runner

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "replay", interrupted)
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    code, _, err = run("replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r"))
    assert code == 130 and "replay: interrupted before its report" in err, err


def test_replay_takes_its_store_from_the_flag_only(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its --help said "env STREAMDEDUP_STORE" while the variable was not read (a replay
    beside `run` must not write into run's store); the help and the flag now say so."""
    got = captured(monkeypatch)
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    base = ["replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r")]
    env = {"STREAMDEDUP_STORE": str(tmp_path / "run-store")}
    run(*base, env=env)
    run(*base, "--store", str(tmp_path / "mine"), env=env)
    assert [c.store for c in got] == [None, tmp_path / "mine"]  # type: ignore[attr-defined]
    _, out, _ = run("replay", "--help")
    assert "env STREAMDEDUP_STORE]" not in out and "STREAMDEDUP_STORE is not read" in " ".join(
        out.split())


def test_replay_does_not_read_what_it_leaves_out(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``STREAMDEDUP_RETENTION=garbage`` (set for ``run``) was refused by the replay, which
    leaves the variable out. (The replay itself is faked: it reads its settings again.)"""
    got = captured(monkeypatch)
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    code, _, err = run("replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r"),
                       env={"STREAMDEDUP_RETENTION": "garbage"})
    assert code == 130 and len(got) == 1 and "duration" not in err, err


def test_replay_refuses_a_redis_flag_for_its_consumers_sqlite_store(tmp_path: Path) -> None:
    """Its consumer opens a store: --redis-url without --store-backend redis would measure
    SQLite without a word. With --no-consumer it opens none and takes the flag."""
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "d", "Milano", "2020", "l"]])
    argv = ["replay", "--dump", str(tsv), "--report-dir", str(tmp_path / "r"),
            "--bootstrap-servers", "127.0.0.1:9", "--redis-url", "redis://x"]
    code, _, err = run(*argv)
    assert code == 2 and "--redis-url is for --store-backend redis" in err, err
    code, _, err = run(*argv, "--no-consumer")
    assert code == 1 and "--redis-url" not in err, err
