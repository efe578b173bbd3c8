"""Running the command line in process (click's runner) on small dumps, for tests/cli."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from streamdedup.cli.main import main

ADS = [
    ("Sviluppatore Java", "Cerchiamo sviluppatore Java con esperienza in Spring e Hibernate "
                          "per progetto bancario a Milano, contratto a tempo indeterminato."),
    ("Sviluppatore Java", "Cerchiamo sviluppatore Java con esperienza in Spring e Hibernate "
                          "per progetto bancario a Milano, contratto a tempo indeterminato."),
    ("Sistemista Linux", "Azienda di Torino ricerca sistemista Linux per gestione server, "
                         "reti e sicurezza; richiesta conoscenza di Ansible e Docker."),
]


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    lines = ["title\tdescription\tlocation\ttimestamp\tlink"]
    lines += ["\t".join(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def into_closed_pipe(*args: str, buffered: bool) -> tuple[int, str]:
    """`streamdedup ARGS | head -0`: the command in a child whose standard output is a pipe
    closed before it writes; its status and what it said. ``buffered``: as in a user's
    shell, where Python finds that a write failed only when it flushes its buffer; CI sets
    PYTHONUNBUFFERED, under which each write fails at once."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "streamdedup", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    said = proc.stderr.read().decode()
    return proc.wait(timeout=120), said
