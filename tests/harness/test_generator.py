"""The ad generator: deterministic from a seed, honest about its duplicate share, and its exact
reposts are caught by the detector. Learns from a small TSV written here (no third-party data)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from harness.generator import EDIT_KINDS, Generator, learn, write_jsonl
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Detector
from streamdedup.settings import build_settings
from streamdedup.store import open_store

_ADS = [
    ("Sviluppatore Java", "Azienda informatica cerca sviluppatore Java con esperienza.\n"
     "Requisiti: conoscenza di Spring e database relazionali.\nSede di lavoro: Milano.",
     "Milano"),
    ("Addetto call center", "Cerchiamo operatori telefonici anche prima esperienza.\n"
     "Si offre contratto e formazione gratuita.\nOrario part time dal lunedì al venerdì.",
     "Napoli"),
    ("Tecnico reti", "Società di consulenza ricerca tecnico reti e sistemi.\n"
     "Richiesta conoscenza di Linux, firewall e switch.\nDisponibilità a trasferte.",
     "Roma"),
    ("Web designer", "Agenzia di comunicazione cerca web designer creativo.\n"
     "Conoscenza di HTML, CSS e strumenti di grafica.\nInviare portfolio e curriculum.",
     "Torino"),
    ("Sistemista Linux", "Cerchiamo sistemista con esperienza su server Linux e cloud.\n"
     "Si offre contratto a tempo indeterminato.\nLavoro in team giovane e dinamico.",
     "Bologna"),
]


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "ads.tsv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t")
        writer.writerow(["title", "description", "location", "timestamp", "link"])
        for i, (title, desc, loc) in enumerate(_ADS * 3):  # repeats: learned once
            writer.writerow([title, desc, loc, "oggi", f"https://x.example/{i}"])
    return path


def test_same_seed_same_stream_other_seed_other_stream(dump: Path) -> None:
    model = learn(dump)
    a = list(Generator(model, 11).ads(300))
    b = list(Generator(learn(dump), 11).ads(300))
    c = list(Generator(model, 12).ads(300))
    assert a == b
    assert a != c
    assert len({ad["id"] for ad in a}) == 300


def test_learns_distinct_texts_only(dump: Path) -> None:
    model = learn(dump)
    assert model.source_ads == 15
    assert model.distinct_descriptions == 5


@pytest.mark.parametrize("share", [0.1, 0.4])
def test_duplicate_share_is_respected(dump: Path, share: float) -> None:
    ads = list(Generator(learn(dump), 3, dup_share=share, exact_share=0.5).ads(3000))
    reposts = [ad for ad in ads if ad["repost_of"]]
    assert abs(len(reposts) / len(ads) - share) < 0.04
    exact = [ad for ad in reposts if not ad["edits"]]
    assert abs(len(exact) / len(reposts) - 0.5) < 0.08
    originals = {ad["id"]: ad for ad in ads if not ad["repost_of"]}
    for ad in reposts:
        orig = originals[ad["repost_of"]]
        assert int(ad["id"].split("-")[1]) > int(orig["id"].split("-")[1])
        if not ad["edits"]:
            assert (ad["title"], ad["description"]) == (orig["title"], orig["description"])
        else:
            assert set(ad["edits"].split(",")) <= set(EDIT_KINDS)
            assert ad["title"] == orig["title"]


def test_detector_flags_exact_reposts(dump: Path) -> None:
    settings = build_settings("default", env={}, overrides={"store_backend": "memory"})
    sketcher = Sketcher(settings)
    detector = Detector(settings, open_store("memory", "", sketcher.params()), sketcher)
    ads = list(Generator(learn(dump), 5, dup_share=0.3).ads(400))
    verdicts = detector.process_many([Document(ad["id"], ad) for ad in ads])
    exact = [(ad, v) for ad, v in zip(ads, verdicts, strict=True)
             if ad["repost_of"] and not ad["edits"]]
    assert exact
    for ad, v in exact:
        assert v.duplicate, ad["id"]
        assert ad["repost_of"] in {m.id for m in v.matches} or v.exact


def test_jsonl_round_trip(dump: Path) -> None:
    ads = list(Generator(learn(dump), 1).ads(20))
    buf = io.StringIO()
    assert write_jsonl(iter(ads), buf) == 20
    assert [json.loads(line) for line in buf.getvalue().splitlines()] == ads


def test_bad_shares_are_refused(dump: Path) -> None:
    model = learn(dump)
    with pytest.raises(ValueError, match="dup_share"):
        Generator(model, dup_share=1.0)
    with pytest.raises(ValueError, match="exact_share"):
        Generator(model, exact_share=-0.1)
