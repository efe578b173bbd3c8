"""Output files on the command line (``cli/output.py``): an ``--out`` that is the input, or that
cannot be created, is refused in one line before anything is read or written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import click
import pytest
from command_line import ADS, run, write_tsv

from streamdedup.cli.output import open_output


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    return write_tsv(tmp_path / "ads.tsv", [[t, d, "Milano", "2020", f"l{i}"]
                                            for i, (t, d) in enumerate(ADS)])


@pytest.mark.parametrize("command", [["check"], ["backfill", "--engine", "local"]])
def test_an_out_that_is_the_input_is_refused_and_the_input_kept(
        dump: Path, tmp_path: Path, command: list[str]) -> None:
    before = dump.read_bytes()
    link = tmp_path / "link.tsv"
    link.symlink_to(dump)
    for out in (dump, tmp_path / "." / "ads.tsv", link):
        code, _, err = run(*command, str(dump), "--out", str(out),
                           "--store", str(tmp_path / "s"))
        assert code == 2 and "is the input" in err and "Traceback" not in err, err
        assert dump.read_bytes() == before
    assert not (tmp_path / "s").exists()  # refused before the store was made


def test_backfills_errors_file_may_not_be_the_input_either(dump: Path, tmp_path: Path) -> None:
    before = dump.read_bytes()
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out",
                       str(tmp_path / "v.jsonl"), "--errors", str(dump),
                       "--store", str(tmp_path / "s"))
    assert code == 2 and "--errors" in err and "is the input" in err, err
    assert dump.read_bytes() == before


@pytest.mark.parametrize("command", [["check", "DUMP"], ["backfill", "DUMP", "--engine", "local"],
                                     ["store", "export"]])
def test_an_out_in_a_missing_directory_is_one_line(
        dump: Path, tmp_path: Path, command: list[str]) -> None:
    if command[0] == "store":  # a store to export from
        assert run("check", str(dump), "--store", str(tmp_path / "s"),
                   "--out", str(tmp_path / "v.jsonl"))[0] == 0
    args = [str(dump) if a == "DUMP" else a for a in command]
    code, _, err = run(*args, "--out", str(tmp_path / "nodir" / "v.jsonl"),
                       "--store", str(tmp_path / "s"))
    assert code == 2 and "no directory" in err and str(tmp_path / "nodir") in err, err


def test_an_out_the_file_system_refuses_is_one_line(dump: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A name longer than the file system allows, and (a fake: root, as CI runs, writes
    through permissions) a disk that refuses the file when it is opened."""
    code, _, err = run("check", str(dump), "--out", str(tmp_path / ("v" * 300)),
                       "--store", str(tmp_path / "s"))
    assert code == 2 and "name too long" in err and "Traceback" not in err, err

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(click.ClickException, match=r"cannot write --out .*No space left"):
        open_output(tmp_path / "v.jsonl")


def test_devices_are_outputs_like_any_other(dump: Path, tmp_path: Path) -> None:
    """Two outputs may both be /dev/null (a device is no file being read)."""
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out", "/dev/null",
                       "--errors", "/dev/null", "--store", str(tmp_path / "s"))
    assert code == 0, err


@pytest.mark.parametrize("exists", [True, False])
def test_errors_and_out_may_not_be_one_file(dump: Path, tmp_path: Path, exists: bool) -> None:
    """Also a file not made yet, spelt twice: the verdicts overwrote the error rows."""
    out = tmp_path / "v.jsonl"
    if exists:
        out.write_text("")
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out", str(out),
                       "--errors", str(tmp_path / "." / "v.jsonl"),
                       "--store", str(tmp_path / "s"))
    assert code == 2 and "is also --out" in err, err


@pytest.mark.parametrize("command", [["check", "DUMP"], ["store", "export"]])
def test_an_out_in_the_stores_directory_is_refused(dump: Path, tmp_path: Path,
                                                  command: list[str]) -> None:
    """``store export --out STORE/index.sqlite`` emptied the store it was reading."""
    store = tmp_path / "s"
    assert run("check", str(dump), "--store", str(store), "--out", str(tmp_path / "v"))[0] == 0
    before = (store / "index.sqlite").read_bytes()
    args = [str(dump) if a == "DUMP" else a for a in command]
    code, _, err = run(*args, "--store", str(store), "--out", str(store / "index.sqlite"))
    assert code == 2 and "in the store's directory" in err, err
    assert (store / "index.sqlite").read_bytes() == before


def test_a_loop_of_links_is_one_line(dump: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    code, _, err = run("check", str(dump), "--out", str(loop), "--store", str(tmp_path / "s"))
    assert code in (1, 2) and "Traceback" not in err and "symbolic links" in err, err


def test_an_out_that_is_a_device_needs_errors_named(dump: Path, tmp_path: Path) -> None:
    """--out /dev/stdout made /dev/stdout.errors.jsonl, a regular file in /dev."""
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out", "/dev/null",
                       "--store", str(tmp_path / "s"))
    assert code == 2 and "give --errors FILE too" in err, err
    assert not Path("/dev/null.errors.jsonl").exists()


def test_a_report_in_the_stores_directory_is_refused(dump: Path, tmp_path: Path) -> None:
    code, _, err = run("backfill", str(dump), "--engine", "local", "--out",
                       str(tmp_path / "v.jsonl"), "--store", str(tmp_path / "s"),
                       "--report", str(tmp_path / "s"))
    assert code == 2 and "is the store's directory" in err, err
    assert not (tmp_path / "s").exists()


def test_checked_output_refuses_each_place_that_cannot_take_verdicts(tmp_path: Path) -> None:
    """In the store's directory by another spelling, an existing directory, below a loop of
    links: each a UsageError (exit 2) naming the option, before any work."""
    from streamdedup.cli.output import checked_output

    store = tmp_path / "s"
    store.mkdir()
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for out, said in [(store / ".." / "s" / "v.jsonl", "is in the store's directory"),
                      (tmp_path, "is a directory"),
                      (loop / "v.jsonl", "--out")]:
        with pytest.raises(click.UsageError, match=said):
            checked_output(out, store=store)
    assert checked_output(tmp_path / "v.jsonl", store=store) == tmp_path / "v.jsonl"


def test_a_report_directory_below_a_file_is_refused(tmp_path: Path) -> None:
    from streamdedup.cli.output import writable_directory

    (tmp_path / "f").write_text("x")
    with pytest.raises(click.UsageError, match="is not a directory"):
        writable_directory(tmp_path / "f" / "report", "--report")
    writable_directory(tmp_path / "new" / "report", "--report")  # made later: taken
