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
