"""One analyzer shared by every lexical retriever and the phrase stage.

Latin-script text becomes lower-cased words of two or more characters (the
``(?u)\\b\\w\\w+\\b`` rule of scikit-learn and bm25s); English stopwords (the Lucene list
that bm25s ships) and Snowball stemming (PyStemmer) are optional. Runs of CJK characters
carry no spaces to split on, so they become overlapping character bigrams, the usual
segmentation-free indexing of Chinese and Japanese text (Kwok 1997, "Comparing
representations in Chinese information retrieval").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|(?:(?![{_CJK}])\w)+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")



def _word_list(package: str, path: str, name: str) -> frozenset[str]:
    """A word list a library keeps in a module of its own that imports nothing (bm25s's
    `stopwords.py`, scikit-learn's `feature_extraction/_stop_words.py`), read from that
    file without importing the library: importing scikit-learn for 318 words costs over a
    second, on every command that reads a story. Falls back to importing it."""
    import importlib
    import importlib.util
    from pathlib import Path

    try:
        found = importlib.util.find_spec(package)
        file = Path(found.submodule_search_locations[0], *path.split("/"))
        spec = importlib.util.spec_from_file_location(f"garden._words_{package}", file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return frozenset(getattr(module, name))
    except Exception:  # a layout that moved: the library's own import, slower but the same words
        module = importlib.import_module(f"{package}.{path.removesuffix('.py').replace('/', '.')}")
        return frozenset(getattr(module, name))


@lru_cache(maxsize=1)
def retrieval_stopwords() -> frozenset[str]:
    """The Lucene English stopword list that bm25s ships."""
    return _word_list("bm25s", "stopwords.py", "STOPWORDS_EN")


@lru_cache(maxsize=1)
def function_words() -> frozenset[str]:
    """Function words for phrase anchors (a span may not open or close with one) and for
    triage: scikit-learn's English list and the retrieval stopwords."""
    return _word_list("sklearn", "feature_extraction/_stop_words.py", "ENGLISH_STOP_WORDS") | retrieval_stopwords()


def __getattr__(name: str):
    # the lists as module constants, read on first use
    if name == "RETRIEVAL_STOPWORDS":
        return retrieval_stopwords()
    if name == "FUNCTION_WORDS":
        return function_words()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@dataclass(frozen=True)
class Analyzer:
    """Turns text into index terms. `stopwords` and `stem` default on: the setting under
    which the reference BM25 figures on Vaswani were measured."""

    stopwords: bool = True
    stem: bool = True

    def __call__(self, text: str) -> list[str]:
        return analyze(text, self.stopwords, self.stem)

    @property
    def key(self) -> str:
        return f"sw={int(self.stopwords)},stem={int(self.stem)}"


def analyze(text: str, stopwords: bool = True, stem: bool = True) -> list[str]:
    terms: list[str] = []
    latin: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        token = match.group(0)
        if _CJK_RUN.match(token):
            terms.extend(cjk_bigrams(token))
        elif len(token) >= 2 and not (stopwords and token in retrieval_stopwords()):
            terms.append(token)
            latin.append(token)
    if stem and latin:
        stemmed = iter(_stemmer().stemWords(latin))
        terms = [next(stemmed) if not _CJK_RUN.match(t) else t for t in terms]
    return terms


_WORD = re.compile(rf"(?:(?![{_CJK}])\w)+")


def word_runs(text: str) -> list[list[str]]:
    """Runs of lower-cased whole words that are separated only by whitespace.

    Punctuation (a hyphen, a comma, an apostrophe) or CJK text between two words ends the
    run, so ``glacier-custard-incident`` is three runs of one word each. These runs are
    what phrase contiguity counts on: no stemming, no stopword removal.
    """
    runs: list[list[str]] = []
    current: list[str] = []
    last_end = None
    lowered = text.lower()
    for match in _WORD.finditer(lowered):
        if last_end is not None and lowered[last_end : match.start()].strip() != "":
            runs.append(current)
            current = []
        current.append(match.group(0))
        last_end = match.end()
    if current:
        runs.append(current)
    return [r for r in runs if r]


def without_function_words(text: str) -> str:
    """The text with Latin-script function words blanked out; CJK text is kept whole.

    A structured ranker should not count "we" or "ever" as evidence that a record is
    relevant, even where the retrieval stopword list (kept short for comparability with
    published BM25 figures) lets them through.
    """
    words = function_words()
    return _WORD.sub(lambda m: " " if m.group(0).lower() in words else m.group(0), text)
