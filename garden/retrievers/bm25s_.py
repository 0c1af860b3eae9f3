"""`bm25s`: the bm25s library's eager sparse BM25 over the shared analyzer.

Lù (2024), "BM25S: Orders of magnitude faster lexical search via eager sparse scoring".
Scoring is Lucene's BM25 (k1=1.5, b=0.75, idf log(1 + (N - n + 0.5) / (n + 0.5))), the
same idf and saturation as `bm25` with its default idf; like Lucene since 8.0 it leaves out
the constant (k1 + 1) numerator, so its scores are those of `bm25` divided by k1 + 1 and
its rankings the same. bm25s computes every term's per-document score once at index time,
so a query is a sum of a few precomputed sparse rows. The
documents and queries are tokenized by the garden analyzer and handed to bm25s as token
lists, so both BM25 retrievers see exactly the same terms.
"""
from __future__ import annotations

from typing import Sequence

import bm25s
import numpy as np

from garden.analyzer import Analyzer
from garden.retrievers import Doc, boolean, choice, id_order, number, register, top_k

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@register("bm25s", "bm25s eager sparse BM25 (Lucene scoring, k1=1.5, b=0.75); stemmed, stopwords removed")
class BM25S:
    # the ranges of `bm25` (Robertson & Zaragoza 2009, section 3.4), k1 = 0 refused for the
    # same reason: bm25s's bm25+ divides 0 by 0 there. make_retriever checks these.
    OPTIONS = {"k1": number(0, above=True), "b": number(0, 1), "method": choice(*METHODS),
               "stopwords": boolean(), "stem": boolean()}

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stopwords: bool = True, stem: bool = True):
        self.name = "bm25s"
        self.k1, self.b, self.method = k1, b, method
        self.analyzer = Analyzer(stopwords=stopwords, stem=stem)
        self.ids: list[str] = []
        self._ids = np.array([], dtype=object)
        self._order = np.array([], dtype=np.int64)
        self._bm25: bm25s.BM25 | None = None
        self._vocab: dict[str, int] = {}

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        self._ids = np.array(self.ids, dtype=object)
        self._order = id_order(self.ids)
        if not docs:
            self._bm25, self._vocab = None, {}
            return
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        self._bm25.index([self.analyzer(d.text) for d in docs], show_progress=False)
        # bm25s adds "" as the term of empty documents; a query never asks for it.
        self._vocab = {t: i for t, i in self._bm25.vocab_dict.items() if t}

    def _scores(self, terms: list[str]) -> np.ndarray | None:
        """The hot path: no checks beyond what an empty query needs. None when no query
        term is in the index, else one score per document (0 for no match)."""
        vocab = self._vocab
        term_ids = [vocab[t] for t in terms if t in vocab]
        if not term_ids:
            return None
        return self._bm25.get_scores_from_ids(term_ids)

    def _score_terms(self, terms: list[str]) -> dict[str, float]:
        scores = self._scores(terms)
        if scores is None:
            return {}
        hits = np.flatnonzero(scores)
        return dict(zip(self._ids[hits].tolist(), scores[hits].tolist()))

    def _top_terms(self, terms: list[str], k: int | None) -> list[tuple[str, float]]:
        scores = self._scores(terms)
        if scores is None:
            return []
        return top_k(scores, self._ids, self._order, k, np.flatnonzero(scores))

    def score(self, query: str) -> dict[str, float]:
        if self._bm25 is None:
            return {}
        return self._score_terms(self.analyzer(query))

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        if self._bm25 is None:
            return [{} for _ in queries]
        analyze = self.analyzer
        return [self._score_terms(analyze(q)) for q in queries]

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        """`rank(self.score(query), k)`, computed on the score array."""
        if self._bm25 is None:
            return []
        return self._top_terms(self.analyzer(query), k)

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        if self._bm25 is None:
            return [[] for _ in queries]
        analyze = self.analyzer
        return [self._top_terms(analyze(q), k) for q in queries]
