"""`bm25s`: the bm25s library's eager sparse BM25 over the shared analyzer.

Lù (2024), "BM25S: Orders of magnitude faster lexical search via eager sparse scoring".
Scoring is Lucene's BM25 (k1=1.5, b=0.75, idf log(1 + (N - n + 0.5) / (n + 0.5))), the
same idf and saturation as `bm25` with its default idf; like Lucene since 8.0 it leaves out
the constant (k1 + 1) numerator, so its scores are those of `bm25` divided by k1 + 1 and
its rankings the same. bm25s computes every term's per-document score once at index time,
so a query is a sum of a few precomputed sparse rows. The
documents and queries are tokenized by the garden analyzer and handed to bm25s as token
lists, so both BM25 retrievers see exactly the same terms.

The other methods are those of Kamphuis, de Vries, Boytsov & Lin (2020), "Which BM25 do you
mean? A large-scale reproducibility study of scoring variants", as bm25s implements them;
`IDF` and `SATURATED` below give each one's idf and the limit of its term-frequency part,
from which `ceiling` bounds every score a query can get.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from garden.analyzer import Analyzer
from garden.retrievers import LEXICAL, Doc, DocIds, RetrieverBase, State, boolean, choice, number, register

def _bm25s():
    """The bm25s library, imported on first use: the registry loads every retriever module
    to list their names, and a command that never indexes should not pay for it."""
    import bm25s

    return bm25s


METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
NONOCCURRENCE_METHODS = ("bm25l", "bm25+")   # bm25s's methods_requiring_nonoccurrence
DELTA = 0.5                                  # bm25s's default delta (bm25l, bm25+)


@dataclass(frozen=True)
class Eager:
    """bm25s's eager index as it scores a query (`BM25.get_scores_from_ids`): term by term
    in the query's order, each term's precomputed row added into the documents' scores
    (`np.add.at`, in the index's dtype), then the non-occurrence scores of the query's
    terms (bm25l, bm25+). Reproduced here to the bit (tests/test_retrievers.py compares it
    with bm25s) so that a saved index scores without importing bm25s."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    num_docs: int
    nonoccurrence: np.ndarray | None
    dtype: np.dtype

    def scores(self, term_ids: list[int]) -> np.ndarray:
        ids = np.asarray(term_ids, dtype=np.int32)
        starts, ends = self.indptr[ids], self.indptr[ids + 1]
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for start, end in zip(starts.tolist(), ends.tolist()):
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        if self.nonoccurrence is not None:
            scores += self.nonoccurrence[ids].sum()
        return scores

# idf(N, n) of each method, as bm25s computes it (bm25s.scoring); robertson's is floored at
# 0, as bm25s does by default
IDF: dict[str, Callable[[int, int], float]] = {
    "lucene": lambda N, n: math.log(1 + (N - n + 0.5) / (n + 0.5)),
    "robertson": lambda N, n: math.log(max(1.0, (N - n + 0.5) / (n + 0.5))),
    "atire": lambda N, n: math.log(N / n),
    "bm25l": lambda N, n: math.log((N + 1) / (n + 0.5)),
    "bm25+": lambda N, n: math.log((N + 1) / n),
}

# the term-frequency part's limit as tf grows: lucene and robertson leave out the (k1 + 1)
# numerator, atire and bm25l keep it, bm25+ adds delta to it
SATURATED: dict[str, Callable[[float, float], float]] = {
    "lucene": lambda k1, delta: 1.0,
    "robertson": lambda k1, delta: 1.0,
    "atire": lambda k1, delta: k1 + 1,
    "bm25l": lambda k1, delta: k1 + 1,
    "bm25+": lambda k1, delta: k1 + 1 + delta,
}


def highest_idf(method: str, n_docs: int) -> float:
    """The idf of a word no document holds (n = 0), where the method's idf is finite
    there; atire's and bm25+'s divide by n, so for them it is that of a word in one document."""
    try:
        return IDF[method](n_docs, 0)
    except ZeroDivisionError:
        return IDF[method](n_docs, 1)


@register("bm25s", "bm25s eager sparse BM25 (Lucene scoring, k1=1.5, b=0.75); stemmed, stopwords removed")
class BM25S(RetrieverBase):
    kind = LEXICAL
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
        self._docs = DocIds()
        self._eager: Eager | None = None   # the fitted score matrix; None: nothing fitted
        self._vocab: dict[str, int] = {}
        self._doc_freq: dict[str, int] = {}  # term -> documents holding it, for `ceiling`

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        self._docs = DocIds(self.ids)
        if not docs:
            self._eager, self._vocab, self._doc_freq = None, {}, {}
            return
        corpus = [self.analyzer(d.text) for d in docs]
        model = _bm25s().BM25(k1=self.k1, b=self.b, method=self.method)
        model.index(corpus, show_progress=False)
        scores = model.scores
        self._eager = Eager(scores["data"], scores["indices"], scores["indptr"], int(scores["num_docs"]),
                            model.nonoccurrence_array, np.dtype(model.dtype))
        # bm25s adds "" as the term of empty documents; a query never asks for it.
        self._vocab = {t: i for t, i in model.vocab_dict.items() if t}
        self._doc_freq = Counter(term for terms in corpus for term in set(terms))

    def state(self) -> State:
        """bm25s's own saved parts (the sparse score matrix, its vocabulary and the
        non-occurrence array of bm25l and bm25+), as bm25s itself saves them without
        pickle, and the document frequencies `ceiling` reads."""
        state = State(meta={"fitted": self._eager is not None})
        state.put_strings("ids", self.ids)
        if self._eager is not None:  # the vocabulary without bm25s's "" (see `index`)
            eager = self._eager
            state.meta["num_docs"] = eager.num_docs
            for part in ("data", "indices", "indptr"):
                state.put(f"scores.{part}", getattr(eager, part))
            state.put_strings("vocab.terms", list(self._vocab))
            state.put("vocab.ids", np.array(list(self._vocab.values()), dtype=np.int64))
            state.put_strings("df.terms", list(self._doc_freq))
            state.put("df.counts", np.array(list(self._doc_freq.values()), dtype=np.int64))
            if eager.nonoccurrence is not None:
                state.put("nonoccurrence", eager.nonoccurrence)
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        ids = state.ids_of(docs)
        self.ids, self._docs = ids, DocIds(ids)
        self._eager, self._vocab, self._doc_freq = None, {}, {}
        if not state.meta.get("fitted") or not ids:
            return
        if state.number("num_docs") != len(ids):
            raise ValueError("saved for another number of documents")
        indptr = state.array("scores.indptr", "iu")
        data = state.array("scores.data", "f", 1, int(indptr[-1]) if len(indptr) else 0)
        indices = state.positions("scores.indices", len(ids), len(data))
        if not len(indptr) or indptr[0] != 0 or (np.diff(indptr) < 0).any():
            raise ValueError("array 'scores.indptr' does not cut the scores into terms")
        terms = state.strings("vocab.terms")
        vocab = dict(zip(terms, state.positions("vocab.ids", len(indptr) - 1, len(terms)).tolist()))
        nonoccurrence = (state.array("nonoccurrence", "f", 1, len(indptr) - 1)
                         if self.method in NONOCCURRENCE_METHODS else None)
        df_terms = state.strings("df.terms")
        self._doc_freq = dict(zip(df_terms, state.array("df.counts", "i", 1, len(df_terms)).tolist()))
        # scored as bm25s scores (`Eager`), without importing it: a saved index is read and
        # asked with numpy alone (bm25s and the scipy it loads cost a command's start)
        self._eager = Eager(data, indices, indptr, len(ids), nonoccurrence, np.dtype(np.float32))
        self._vocab = vocab

    def _scores(self, terms: list[str]) -> np.ndarray | None:
        """The hot path: no checks beyond what an empty query needs. None when no query
        term is in the index, else one score per document (0 for no match)."""
        vocab = self._vocab
        term_ids = [vocab[t] for t in terms if t in vocab]
        if not term_ids:
            return None
        return self._eager.scores(term_ids)

    def _score_terms(self, terms: list[str]) -> dict[str, float]:
        scores = self._scores(terms)
        if scores is None:
            return {}
        hits = np.flatnonzero(scores)
        return dict(zip(self._docs.ids[hits].tolist(), scores[hits].tolist()))

    def _top_terms(self, terms: list[str], k: int | None) -> list[tuple[str, float]]:
        scores = self._scores(terms)
        if scores is None:
            return []
        return self._docs.top(scores, k, np.flatnonzero(scores))

    def score(self, query: str) -> dict[str, float]:
        if self._eager is None:
            return {}
        return self._score_terms(self.analyzer(query))

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        if self._eager is None:
            return [{} for _ in queries]
        analyze = self.analyzer
        return [self._score_terms(analyze(q)) for q in queries]

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        """`rank(self.score(query), k)`, computed on the score array."""
        if self._eager is None:
            return []
        return self._top_terms(self.analyzer(query), k)

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        if self._eager is None:
            return [[] for _ in queries]
        analyze = self.analyzer
        return [self._top_terms(analyze(q), k) for q in queries]

    def ceiling(self, query: str) -> float:
        """The best score any document could reach for this query: each query term
        saturated (tf -> infinity), the sum over the query's terms of idf times the
        method's limit (`SATURATED`). Under the default Lucene scoring that is the sum of
        idf, since the (k1 + 1) numerator is left out: `bm25`'s ceiling divided by k1 + 1,
        as its scores are. A query word the store has never seen counts at the highest idf
        (`highest_idf`), as under `bm25`. 0.0 on an empty index."""
        if self._eager is None:
            return 0.0
        n_docs, idf = len(self.ids), IDF[self.method]
        saturated = SATURATED[self.method](self.k1, DELTA)
        unseen = highest_idf(self.method, n_docs)
        doc_freq = self._doc_freq
        return sum((idf(n_docs, doc_freq[t]) if t in doc_freq else unseen) * saturated
                   for t in self.analyzer(query))
