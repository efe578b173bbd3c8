"""Text normalization: the original study's steps, each switchable.

HTML -> text, lowercase, accent folding, punctuation and digits to spaces, stopword removal,
Snowball stemming. Pure: a ``Normalizer`` is built once from settings (loading its stopword
list from an installed package or a file) and then maps str -> str with no I/O.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import logging
import re
import sys
import threading
import types
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from streamdedup.core.markup import html_to_text
from streamdedup.errors import ConfigError
from streamdedup.settings import Settings, setting_named

log = logging.getLogger(__name__)

_PUNCT = re.compile(r"[^\w\s]|_")
_DIGITS = re.compile(r"\d")
_PUNCT_AND_DIGITS = re.compile(r"[^\w\s]|[\d_]")  # both in one pass
_WORD_MEMO_SIZE = 1 << 18


def fold_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def load_stopwords(spec: str) -> frozenset[str]:
    """Stopwords from stopwordsiso by language code, or from a word-per-line file."""
    if not spec:
        return frozenset()
    path = Path(spec)
    if path.suffix or "/" in spec:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read stopword file {spec}: {exc}") from exc
        except UnicodeDecodeError as exc:  # a Latin-1 list is a likely mistake
            raise ConfigError(f"stopword file {spec} is not UTF-8 (byte {exc.start}); save it "
                              "as UTF-8") from None
        return frozenset(w.strip().lower() for w in lines if w.strip() and not w.startswith("#"))
    import stopwordsiso

    if not stopwordsiso.has_lang(spec):
        raise ConfigError(f"{setting_named('stopwords')}: no stopword list for language "
                          f"{spec!r} in stopwordsiso")
    return frozenset(stopwordsiso.stopwords(spec))


class _HideScipy(importlib.abc.MetaPathFinder):
    """Makes ``import scipy`` fail while it is on ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "scipy" or name.startswith("scipy."):
            raise ImportError(f"{name} is hidden while nltk loads")
        return None


def _snowball_stemmer_class() -> Any:
    """nltk's ``SnowballStemmer``, without the 0.3-0.6 s that ``import nltk`` costs.

    Any nltk import runs ``nltk/__init__``, which imports nearly all of nltk (corpus readers,
    parsers, translation metrics: 0.28 s, a third of a one-line ``check``) and reaches
    ``scipy.stats`` through ``nltk.collocations`` (another 0.58 s where scipy is installed).
    The stemmer's file and the five small modules it imports are run from nltk's own files
    instead (``_load_snowball_alone``), once per process; if that fails (a future nltk laid
    out otherwise), or some of nltk is imported already, nltk is imported whole, with scipy
    hidden. Same file, same stems either way; the stores pin the stems (``stemmer_sha256``)."""
    global _ALONE
    loaded = sys.modules.get("nltk.stem.snowball")
    if loaded is not None:
        return loaded.SnowballStemmer
    with _LOADING:
        if _ALONE is not None:
            return _ALONE
        if not any(n == "nltk" or n.startswith("nltk.") for n in sys.modules):
            try:
                _ALONE = _load_snowball_alone()
                return _ALONE
            except Exception as exc:  # any failure: the slow, plain way
                log.debug("nltk's stemmer did not load alone (%s); importing nltk", exc)
    hider = _HideScipy()
    sys.meta_path.insert(0, hider)
    try:
        from nltk.stem.snowball import SnowballStemmer
    finally:
        sys.meta_path.remove(hider)
    return SnowballStemmer


# nltk/stem/snowball.py and what it imports, in import order (nltk.corpus only for its
# ``stopwords``, which the stemmer reads only when asked to ignore stopwords: never here).
_SNOWBALL_PARTS = ("nltk.redos", "nltk.termsec", "nltk.stem.api", "nltk.stem.util",
                   "nltk.stem.porter", "nltk.stem.snowball")
_LOADING = threading.Lock()
_ALONE: Any = None  # the class loaded alone: kept, as loading again would make another


def _load_snowball_alone() -> Any:
    """Run those six files under stand-in packages ``nltk``, ``nltk.stem`` and
    ``nltk.corpus``, then take all of them out of ``sys.modules`` again, so that a later
    ``import nltk`` (a user's code) loads the real package. Done at the first stemmer, as a
    rule at start-up: a thread importing nltk in that millisecond would get a stand-in."""
    spec = importlib.util.find_spec("nltk")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nltk is not installed as a package")
    root = Path(next(iter(spec.submodule_search_locations)))
    added: list[str] = []
    try:
        for name, folder in (("nltk", root), ("nltk.stem", root / "stem"),
                             ("nltk.corpus", None)):
            package = types.ModuleType(name)
            package.__path__ = [str(folder)] if folder else []
            sys.modules[name] = package
            added.append(name)
        sys.modules["nltk.corpus"].stopwords = None  # type: ignore[attr-defined]
        for name in _SNOWBALL_PARTS:
            part = importlib.util.spec_from_file_location(
                name, root.joinpath(*name.split(".")[1:]).with_suffix(".py"))
            if part is None or part.loader is None:
                raise ImportError(f"no file for {name}")
            module = importlib.util.module_from_spec(part)
            sys.modules[name] = module
            added.append(name)
            part.loader.exec_module(module)
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, module)
        return sys.modules["nltk.stem.snowball"].SnowballStemmer
    finally:
        for name in added:
            sys.modules.pop(name, None)


class _Stem:
    """One language's stem function. It pickles as its language (a process that unpickles
    it makes its own stemmer): the class loaded alone cannot be found by its name."""

    __slots__ = ("language", "stem")

    def __init__(self, language: str, stem: Callable[[str], str]) -> None:
        self.language = language
        self.stem = stem

    def __call__(self, word: str) -> str:
        return self.stem(word)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return make_stemmer, (self.language,)


def make_stemmer(language: str) -> Callable[[str], str]:
    """A Snowball stemmer (nltk's; needs no downloaded data)."""
    if not language:
        return _unstemmed
    SnowballStemmer = _snowball_stemmer_class()

    if language not in SnowballStemmer.languages:
        raise ConfigError(
            f"{setting_named('stem_language')}: no Snowball stemmer for {language!r}; known: "
            f"{', '.join(SnowballStemmer.languages)}")
    return _Stem(language, SnowballStemmer(language).stem)


def _unstemmed(word: str) -> str:
    return word


class Normalizer:
    """Maps raw announcement text to the token string that gets shingled."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        words = load_stopwords(settings.stopwords)
        if settings.fold_accents:
            words = frozenset(fold_accents(w) for w in words)
        self.stopwords = words
        self._stem = make_stemmer(settings.stem_language)
        self._strip = (
            _PUNCT_AND_DIGITS if settings.strip_punctuation and settings.strip_digits
            else _PUNCT if settings.strip_punctuation
            else _DIGITS if settings.strip_digits
            else None
        )
        self._words: dict[str, str] = {}  # word -> stem, or "" for a stopword
        self._tokens: dict[str, str] = {}  # raw token -> its stems joined, or ""

    def _word(self, word: str) -> str:
        """Stopword check and stemming of one word, memoized (ads reuse their vocabulary)."""
        if len(self._words) >= _WORD_MEMO_SIZE:
            self._words.clear()
        out = self._words[word] = "" if word in self.stopwords else self._stem(word)
        return out

    def _token(self, token: str) -> str:
        """One whitespace-separated token of the raw text -> its stems, joined by spaces.

        Lowercasing, accent folding and the punctuation and digit regex all work character
        by character and never across whitespace (even Greek final sigma looks no further
        than the next space), so normalizing token by token gives exactly what normalizing
        the whole text gives; it is memoized here, because ads reuse their tokens: the
        per-token work then runs once per distinct token instead of once per character
        (0.40 -> 0.05 ms per generated ad)."""
        s = self.settings
        text = token.lower() if s.lowercase else token
        if s.fold_accents:
            text = fold_accents(text)  # may make spaces (U+00A8 -> " \u0308"): split below
        if self._strip is not None:
            text = self._strip.sub(" ", text)
        memo = self._words
        stems = []
        for word in text.split():
            stem = memo.get(word)
            if stem is None:
                stem = self._word(word)
            if stem:
                stems.append(stem)
        if len(self._tokens) >= _WORD_MEMO_SIZE:
            self._tokens.clear()
        out = self._tokens[token] = " ".join(stems)
        return out

    def __call__(self, text: str) -> str:
        if self.settings.strip_html:
            text = html_to_text(text, version=self.settings.normalizer_version)
        tokens = text.split()
        stems = list(map(self._tokens.get, tokens))  # in C: ~0.5 us a token less than a loop
        if None in stems:
            stems = [self._token(t) if s is None else s for t, s in zip(tokens, stems, strict=True)]
        return " ".join(filter(None, stems))

    def describe(self) -> dict[str, Any]:
        """What makes two normalizers' outputs comparable; stored with the index."""
        s = self.settings
        return {
            "normalizer_version": s.normalizer_version,
            "text_fields": list(s.text_fields),
            "strip_html": s.strip_html,
            "lowercase": s.lowercase,
            "strip_punctuation": s.strip_punctuation,
            "strip_digits": s.strip_digits,
            "fold_accents": s.fold_accents,
            "stopwords": s.stopwords,
            "stopword_count": len(self.stopwords),
            "stopwords_sha256": _digest(sorted(self.stopwords)),
            "stem_language": s.stem_language,
            "stemmer_sha256": _digest(self._stem(w) for w in STEMMER_PROBE),
        }


# Words whose stems fingerprint the stemmer's behaviour (plural, gender, verb and adverb
# endings in the Snowball languages we ship presets for): an nltk upgrade that changes a stem
# changes this digest, and a store built with the old stems refuses to open.
STEMMER_PROBE = (
    "sviluppatori", "sviluppatrice", "programmazione", "lavorando", "lavorerebbero",
    "esperienze", "velocemente", "candidature", "informatiche", "responsabilità",
    "developers", "programming", "worked", "working", "experiences", "quickly",
    "responsibilities", "engineering", "generalization", "happiness",
)


def _digest(words: Iterable[str]) -> str:
    """sha256 of the words, one per line: a normalization resource pinned by its content."""
    return hashlib.sha256("\n".join(words).encode("utf-8", "surrogatepass")).hexdigest()


def compose_text(fields: Mapping[str, str], names: tuple[str, ...]) -> str:
    """Join the configured fields (missing ones count as empty) into one text."""
    return "\n".join(fields.get(name) or "" for name in names)
