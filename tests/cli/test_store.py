"""`streamdedup store`: `store export` into a closed pipe (`| head -1`) ends quietly;
`store backup` copies and checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from command_line import run, write_tsv


def checked_store(tmp_path: Path, ads: int) -> str:
    """A store of ``ads`` distinct ads, made by `check`; its directory."""
    rows = [[f"annuncio {i}", f"testo numero {i} di prova", "Milano", "2020", f"l{i}"]
            for i in range(ads)]
    store = str(tmp_path / "s")
    code, _, err = run("check", str(write_tsv(tmp_path / "ads.tsv", rows)), "--store", store,
                       "--out", str(tmp_path / "v.jsonl"))
    assert code == 0, err
    return store


def test_store_export_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`store export | head -1` ended with "Error: cannot write the export: Broken pipe"
    and exit 1, as if the export had failed."""
    import subprocess
    import sys

    store = checked_store(tmp_path, 3000)
    export = subprocess.Popen([sys.executable, "-m", "streamdedup", "store", "export",
                               "--store", store], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert export.stdout is not None and export.stdout.readline().startswith(b'{"id":')
    export.stdout.close()
    assert export.wait(timeout=120) == 141
    assert export.stderr is not None and b"Error" not in export.stderr.read()


def test_store_backup_copies_checks_and_points_redis_at_its_server(tmp_path: Path) -> None:
    store = checked_store(tmp_path, 50)
    code, out, err = run("store", "backup", "--store", store, "--to", str(tmp_path / "b"))
    assert code == 0, err
    assert out.strip() == f"backup {tmp_path / 'b'}: 50 documents, ok"
    code, out, _ = run("store", "stats", "--store", str(tmp_path / "b"))
    assert code == 0 and "documents          50" in out
    assert "clock              none" in out and "None" not in out  # no --retention: no clock
    code, _, err = run("store", "backup", "--store", store, "--to", str(tmp_path / "b"))
    assert code == 2 and "exists: a backup is written to a new directory" in err  # was 1
    for blank in ("", " "):
        code, _, err = run("store", "backup", "--store", store, "--to", blank)
        assert code == 2 and "--to is empty, or the current directory" in err  # ". exists"
    code, _, err = run("store", "backup", "--store-backend", "redis", "--redis-url",
                       "redis://127.0.0.1:9/0", "--to", str(tmp_path / "r"))
    assert code == 2 and "appendonlydir" in err and not (tmp_path / "r").exists()


def test_a_backup_interrupted_while_its_copy_is_checked_says_the_copy_is_unchecked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the check said "interrupted" alone and left the copy as if done."""
    from streamdedup.store.sqlite import maintenance

    store = checked_store(tmp_path, 1)

    def interrupted(*_: object, **__: object) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(maintenance, "verify", interrupted)
    code, _, err = run("store", "backup", "--store", store, "--to", str(tmp_path / "b"))
    assert code == 130 and "interrupted" in err, err
    assert f"the copy at {tmp_path / 'b'} is whole but not checked" in err, err
