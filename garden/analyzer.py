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

from bm25s.stopwords import STOPWORDS_EN
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|(?:(?![{_CJK}])\w)+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

RETRIEVAL_STOPWORDS = frozenset(STOPWORDS_EN)
# Function words for phrase anchors: a span may not open or close with one.
FUNCTION_WORDS = frozenset(ENGLISH_STOP_WORDS) | RETRIEVAL_STOPWORDS


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
        elif len(token) >= 2 and not (stopwords and token in RETRIEVAL_STOPWORDS):
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
    return _WORD.sub(lambda m: " " if m.group(0).lower() in FUNCTION_WORDS else m.group(0), text)
