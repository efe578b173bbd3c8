"""Sketcher: fields -> shingles and set id -> band keys, and the parameters it records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamdedup.core import lsh
from streamdedup.core.minhash import MINHASH_SCHEME, OPH_SCHEME
from streamdedup.core.shingles import HASH_SCHEME, set_fingerprint
from streamdedup.core.sketch import Sketcher
from streamdedup.errors import ConfigError
from streamdedup.settings import Settings, build_settings

AD = {"title": "Sviluppatore Java", "description": "Cercasi sviluppatore Java a Roma."}


def test_bands_are_chosen_from_the_threshold_unless_given() -> None:
    chosen = Sketcher(Settings(threshold=0.8, num_perm=128))
    assert (chosen.bands, chosen.rows) == lsh.choose_bands(0.8, 128)
    assert chosen.recall_at_threshold() >= lsh.DEFAULT_MIN_RECALL
    given = Sketcher(build_settings("reference", env={}))
    assert (given.bands, given.rows) == (20, 5)
    assert given.recall_at_threshold() == pytest.approx(lsh.p_candidate(0.8, 20, 5))


def test_shingle_fields_uses_the_configured_fields_only() -> None:
    ref = Sketcher(build_settings("reference", env={}))  # description only
    a = ref.shingle_fields(AD)
    b = ref.shingle_fields({**AD, "title": "Tutt'altro titolo", "link": "x"})
    assert np.array_equal(a.shingles, b.shingles) and a.set_id == b.set_id
    both = Sketcher(Settings())  # title and description
    assert both.shingle_fields(AD).set_id != both.shingle_fields({**AD, "title": "Altro"}).set_id


def test_set_id_is_the_fingerprint_and_empty_text_has_id_zero() -> None:
    sk = Sketcher(Settings())
    sh = sk.shingle_fields(AD)
    assert sh.shingles.size > 0 and sh.set_id == set_fingerprint(sh.shingles)
    empty = sk.shingle_fields({"title": "!!! 123", "description": "<p>&nbsp;</p>"})
    assert empty.shingles.size == 0 and empty.set_id == 0
    assert sk.shingle_fields({}).set_id == 0


def test_two_sketchers_with_equal_settings_agree() -> None:
    a, b = Sketcher(Settings()), Sketcher(Settings())
    sa, sb = a.shingle_fields(AD), b.shingle_fields(dict(AD))
    assert sa.set_id == sb.set_id
    assert np.array_equal(a.band_keys(sa.shingles), b.band_keys(sb.shingles))


def test_band_keys_many_equals_band_keys() -> None:
    sk = Sketcher(Settings())
    sets = [
        sk.shingle_fields({"description": d}).shingles
        for d in ["uno due tre", "", "sviluppatore python senior", "x"]
    ]
    many = sk.band_keys_many(sets)
    assert many.shape == (4, sk.bands)
    for i, s in enumerate(sets):
        assert np.array_equal(many[i], sk.band_keys(s))


def test_params_name_everything_that_makes_signatures_comparable() -> None:
    s = build_settings("reference", env={})
    p = Sketcher(s).params()
    assert p["hash_scheme"] == HASH_SCHEME and p["minhash_scheme"] == OPH_SCHEME
    old = Sketcher(s.replace(minhash="multiply-shift")).params()
    assert old["minhash_scheme"] == MINHASH_SCHEME
    assert p["band_scheme"] == lsh.BAND_SCHEME
    assert (p["num_perm"], p["seed"], p["bands"], p["rows"]) == (100, 1, 20, 5)
    assert (p["shingle_kind"], p["shingle_size"], p["threshold"]) == ("char", 10, 0.8)
    assert p["stopwords"] == "it" and p["stem_language"] == "italian"
    # Stored as JSON by the SQLite store: must survive the round trip unchanged.
    assert json.loads(json.dumps(p)) == p


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 2}, {"num_perm": 64}, {"shingle_size": 9}, {"shingle_kind": "word"},
        {"stopwords": ""}, {"stem_language": ""}, {"strip_digits": False},
        {"text_fields": ("title",)}, {"threshold": 0.7}, {"minhash": "multiply-shift"},
    ],
)
def test_params_change_with_every_setting_that_changes_signatures(change: dict) -> None:
    assert Sketcher(Settings()).params() != Sketcher(Settings().replace(**change)).params()


def test_params_ignore_settings_that_do_not_change_signatures() -> None:
    other = Settings().replace(max_matches=3, group_id="other", store_backend="memory")
    assert Sketcher(Settings()).params() == Sketcher(other).params()


def test_text_cache_gives_the_same_results_as_no_cache() -> None:
    cached, uncached = Sketcher(Settings(), text_cache=2), Sketcher(Settings(), text_cache=0)
    texts = ["uno due tre quattro", "cinque sei", "uno due tre quattro", "sette", "cinque sei"]
    for t in texts * 2:
        a = cached.shingle_fields({"description": t})
        b = uncached.shingle_fields({"description": t})
        assert a.set_id == b.set_id and np.array_equal(a.shingles, b.shingles)


def test_the_text_cache_and_the_signed_ids_stay_within_their_bounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both live as long as the consumer: a bound not kept is memory that grows for good."""
    from streamdedup.core import sketch as sketch_module

    sketcher = Sketcher(Settings(), text_cache=2)
    texts = ["sviluppatore java milano", "sistemista linux torino", "grafico web roma",
             "magazziniere notturno bologna"]
    for t in texts:
        sketcher.shingle_fields({"description": t})
    assert [raw.strip() for raw in sketcher._cache] == texts[2:]  # the newest two
    monkeypatch.setattr(sketch_module, "SIGNED_MEMORY", 3)
    signed: set[int] = set()
    _, keys = sketcher.sketches([{"description": "sviluppatore java milano"},
                                 {"description": "sistemista linux torino"}], signed)
    assert len(signed) == len(keys) == 2
    _, keys = sketcher.sketches([{"description": "grafico web roma"},
                                 {"description": "magazziniere notturno bologna"}], signed)
    assert len(keys) == 2 and len(signed) == 2  # past the bound: forgotten, then these


@pytest.mark.parametrize("cache", [0, 2, 4096])
def test_a_batch_sketches_each_document_as_alone(cache: int) -> None:
    texts = ["uno due tre quattro", "", "cinque sei", "uno due tre quattro", "x",
             "sette otto nove dieci undici", "cinque sei", "ab"]
    alone = Sketcher(Settings(), text_cache=0)
    batch = Sketcher(Settings(), text_cache=cache)
    for _ in range(2):  # the second time from the cache
        got = batch.shingle_fields_many([{"description": t} for t in texts])
        for t, sh in zip(texts, got, strict=True):
            want = alone.shingle_fields({"description": t})
            assert (sh.set_id, sh.text) == (want.set_id, want.text)
            assert np.array_equal(sh.shingles, want.shingles)
            assert np.array_equal(alone.reshingle(sh.text), sh.shingles)


def test_shared_shingles_cannot_be_modified_by_a_caller() -> None:
    sk = Sketcher(Settings())
    sh = sk.shingle_fields(AD).shingles
    with pytest.raises(ValueError, match="read-only"):
        sh[0] = 0
    assert np.array_equal(sk.shingle_fields(dict(AD)).shingles, sh)


def test_too_few_permutations_for_the_threshold_are_refused_with_the_figure() -> None:
    """Issue 17: --num-perm 1 silently gave P(candidate | s=0.8) = 0.8 instead of >= 0.999."""
    with pytest.raises(ConfigError, match=r"= 0\.8000 < 0\.999.*num_perm >= 5"):
        Sketcher(Settings(num_perm=1))
    assert Sketcher(Settings(num_perm=5)).recall_at_threshold() >= 0.999
    assert lsh.min_num_perm(0.8) == 5 and lsh.min_num_perm(0.5) == 10
    assert lsh.min_num_perm(1.0) == 1  # identical texts only: one permutation tells them
    # explicit bands and rows are the operator's choice (the reference preset's 20 x 5)
    assert Sketcher(Settings(num_perm=100, bands=20, rows=5)).bands == 20
    # past the limit, no num_perm to ask for ("use num_perm >= 1379", then refused)
    with pytest.raises(ConfigError, match=r"no num_perm up to 1024 reaches it.*--bands") as e:
        Sketcher(Settings(threshold=0.005))
    assert ">= 1379" not in str(e.value)
    needed = lsh.min_num_perm(0.007)
    assert 512 < needed <= 1024  # within the limit: still the figure to ask for
    with pytest.raises(ConfigError, match=rf"use num_perm >= {needed}$"):
        Sketcher(Settings(threshold=0.007, num_perm=512))


@pytest.mark.parametrize("texts", [
    [],
    ["", "   "],  # no shingles at all: no set, no keys
    ["Cerchiamo cuoco per ristorante a Milano, turni serali", "",
     "Cerchiamo cuoco per ristorante a Milano, turni serali",  # the same set twice
     "Magazziniere con patentino del muletto, Torino"],
])
def test_sketches_survive_packing_as_made(texts: list[str]) -> None:
    import pickle

    from streamdedup.core.sketch import pack, unpack

    sketcher = Sketcher(Settings())
    docs = [{"title": "", "description": t} for t in texts]
    signed: set[int] = set()
    shingled, keys = sketcher.sketches(docs, signed)
    back, back_keys = unpack(pickle.loads(pickle.dumps(pack((shingled, keys)))))
    assert [(s.set_id, s.text, s.shingles.tolist()) for s in back] == \
        [(s.set_id, s.text, s.shingles.tolist()) for s in shingled]
    assert {k: v.tolist() for k, v in back_keys.items()} == \
        {k: v.tolist() for k, v in keys.items()}
    assert set(keys) == {s.set_id for s in shingled if s.shingles.size} == signed
    assert sketcher.sketches(docs, signed)[1] == {}  # signed once: not again
