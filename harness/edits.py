"""Small edits that turn a job ad into a near-duplicate, as reposts are in real scrapes.

Written once for the whole development harness: the ad generator (``generator.py``) edits
its reposts with the scraper-like kinds (a salary, phone or date line changed, lines
reordered, boilerplate added, typos), the chaos stream (``chaos/stream.py``) with the dump-text
kinds (digits changed, sentences swapped, a line added). Every edit is ``(rng, text) -> text``
and draws from ``rng`` only, so a seed gives the same stream on every machine.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

Edit = Callable[[random.Random, str], str]

MONTHS = (
    "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto",
    "settembre", "ottobre", "novembre", "dicembre",
)
SALARY = (
    "Retribuzione: {n} € netti mensili.",
    "Compenso di {n} euro lordi al mese più provvigioni.",
    "Si offre contratto a tempo determinato con retribuzione di {n} euro.",
    "Fisso mensile garantito di {n} €.",
)
PHONE = (
    "Per informazioni chiamare il {p}.",
    "Tel. {p} (anche WhatsApp).",
    "Contattare il numero {p} dalle 9 alle 18.",
)
DATES = (
    "Inizio attività: {d}/{m}/{y}.",
    "Colloqui a partire dal {d} {month}.",
    "Candidature entro il {d}/{m}/{y}.",
)
BOILERPLATE = (
    "Il presente annuncio è rivolto ad entrambi i sessi, ai sensi delle leggi 903/77 e 125/91.",
    "Inviare il curriculum vitae con autorizzazione al trattamento dei dati personali "
    "ai sensi del Reg. UE 2016/679.",
    "Si prega di allegare una foto recente al curriculum.",
    "Astenersi perditempo e agenzie.",
    "Saranno ricontattati solo i candidati ritenuti in linea con il profilo ricercato.",
    "Per candidarsi cliccare sul pulsante in basso e compilare il modulo.",
)
LETTERS = "abcdefghilmnopqrstuvz"
EXTRA_LINES = (
    "Inviare il curriculum a selezione@example.it",
    "Sede di lavoro: {city}",
    "Contratto a tempo determinato di {n} mesi, con possibilità di rinnovo",
    "Si richiede disponibilità immediata",
    "Retribuzione commisurata all'esperienza",
    "Rif. annuncio {n}",
    "Automunito, zona {city}",
)
CITIES = ("Roma", "Milano", "Torino", "Napoli", "Bologna", "Firenze", "Bari", "Genova")


def salary_line(rng: random.Random) -> str:
    return rng.choice(SALARY).format(n=f"{rng.randrange(800, 3200, 50):,}".replace(",", "."))


def phone_line(rng: random.Random) -> str:
    return rng.choice(PHONE).format(p=f"3{rng.randrange(20, 99)} {rng.randrange(10**6, 10**7)}")


def date_line(rng: random.Random) -> str:
    month = rng.randrange(1, 13)
    return rng.choice(DATES).format(
        d=rng.randrange(1, 29), m=f"{month:02d}", y=rng.choice((2024, 2025)),
        month=MONTHS[month - 1],
    )


def _replace_or_add(text: str, rng: random.Random, family: tuple[str, ...], make: str) -> str:
    """Replace the first line made from a template family, or add one: a changed detail."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if any(line.startswith(t.split("{")[0]) for t in family):
            lines[i] = make
            return "\n".join(lines)
    lines.insert(rng.randrange(len(lines) + 1), make)
    return "\n".join(lines)


def salary(rng: random.Random, text: str) -> str:
    return _replace_or_add(text, rng, SALARY, salary_line(rng))


def phone(rng: random.Random, text: str) -> str:
    return _replace_or_add(text, rng, PHONE, phone_line(rng))


def dates(rng: random.Random, text: str) -> str:
    return _replace_or_add(text, rng, DATES, date_line(rng))


def reorder(rng: random.Random, text: str) -> str:
    """Two lines swapped."""
    lines = text.split("\n")
    if len(lines) >= 2:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def boilerplate(rng: random.Random, text: str) -> str:
    return text + "\n" + rng.choice(BOILERPLATE)


def typos(rng: random.Random, text: str) -> str:
    """One to three character slips (swap, drop, replace), about one per 300 characters."""
    for _ in range(max(1, min(3, len(text) // 300))):
        letters = [i for i in range(len(text) - 1) if text[i].isalpha() and text[i + 1].isalpha()]
        if not letters:
            break
        i = rng.choice(letters)
        how = rng.randrange(3)
        if how == 0:
            text = text[:i] + text[i + 1] + text[i] + text[i + 2:]
        elif how == 1:
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + rng.choice(LETTERS) + text[i + 1:]
    return text


def digits(rng: random.Random, text: str) -> str:
    """One run of digits replaced by another of the same length, or a phone number added."""
    runs = list(re.finditer(r"\d+", text))
    if not runs:
        return f"{text}\nTel. 3{rng.randrange(10**8, 10**9)}"
    run = rng.choice(runs)
    new = str(rng.randrange(10 ** (len(run.group()) - 1) if len(run.group()) > 1 else 0,
                            10 ** len(run.group())))
    return text[: run.start()] + new + text[run.end():]


def swap_sentences(rng: random.Random, text: str) -> str:
    parts = re.split(r"(?<=[.!?])\s+", text)
    if len(parts) < 2:
        return add_line(rng, text)
    i, j = rng.sample(range(len(parts)), 2)
    parts[i], parts[j] = parts[j], parts[i]
    return " ".join(parts)


def add_line(rng: random.Random, text: str) -> str:
    line = rng.choice(EXTRA_LINES).format(city=rng.choice(CITIES), n=rng.randrange(2, 999))
    lines = text.split("\n")
    lines.insert(rng.randrange(len(lines) + 1), line)
    return "\n".join(lines)


# The generator's reposts: details a re-poster changes (names are the ads' ``edits`` field).
SCRAPER_EDITS: dict[str, Edit] = {
    "salary": salary, "phone": phone, "dates": dates, "reorder": reorder,
    "boilerplate": boilerplate, "typos": typos,
}
# The chaos stream's variants of dump rows.
DUMP_EDITS: tuple[Edit, ...] = (digits, swap_sentences, add_line)


def mutate(rng: random.Random, text: str, edits: tuple[Edit, ...] = DUMP_EDITS) -> str:
    """One edit, or (a third of the time) two different ones, in random order."""
    for edit in rng.sample(edits, rng.choice((1, 1, 2))):
        text = edit(rng, text)
    return text
