"""`bm25`: rank-bm25 (BM25Okapi, BM25L or BM25Plus) over the shared analyzer.

Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and Beyond".
rank-bm25's Okapi idf, log((N - n + 0.5) / (n + 0.5)), is zero or negative for a term in
half or more of the documents; on a story of twenty records that is any common word, and
it can rank a record that matches the query below one that does not. By default the idf is
Lucene's log(1 + (N - n + 0.5) / (n + 0.5)), which is positive for every term
(``idf="lucene"``); ``idf="okapi"`` keeps rank-bm25's own.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from rank_bm25 import BM25L, BM25Okapi, BM25Plus

from garden.analyzer import Analyzer
from garden.retrievers._scores import shared_doc_ids
from garden.retrievers import (LEXICAL, ArrayScores, Doc, DocIds, RetrieverBase, State, boolean, choice, number,
                               register)

VARIANTS = {"okapi": BM25Okapi, "l": BM25L, "plus": BM25Plus}


class Postings:
    """Each term's documents and term frequencies, read from rank-bm25's own `doc_freqs`:
    rank-bm25 scores a term by a Python loop over every document, which at a hundred
    thousand records costs tens of milliseconds per query word; these let `term_weights`
    compute the same per-document numbers for the documents that hold the term alone."""

    def __init__(self, doc_freqs: Sequence[dict[str, int]]):
        by_term: dict[str, list[tuple[int, int]]] = {}
        for i, freqs in enumerate(doc_freqs):
            for term, tf in freqs.items():
                by_term.setdefault(term, []).append((i, tf))
        self.span: dict[str, tuple[int, int]] = {}
        docs: list[int] = []
        tfs: list[int] = []
        for term, pairs in by_term.items():
            self.span[term] = (len(docs), len(docs) + len(pairs))
            docs += [i for i, _ in pairs]
            tfs += [tf for _, tf in pairs]
        self.docs = np.array(docs, dtype=np.int64)
        self.tfs = np.array(tfs, dtype=np.int64)  # integers, as rank-bm25's q_freq

    def of(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        start, end = self.span.get(term, (0, 0))
        return self.docs[start:end], self.tfs[start:end]

    def save(self, state: State) -> None:
        state.put_strings("terms", list(self.span))
        state.put("starts", np.array([start for start, _ in self.span.values()] + [len(self.docs)], dtype=np.int64))
        state.put("docs", self.docs)
        state.put("tfs", self.tfs)

    @classmethod
    def load(cls, state: State, n_docs: int) -> Postings:
        postings = cls([])
        terms = state.strings("terms")
        starts = state.positions("starts", len(state.arrays.get("docs", ())) + 1, len(terms) + 1)
        postings.docs = state.positions("docs", n_docs)
        postings.tfs = state.array("tfs", "i", 1, len(postings.docs))
        if not state.ordered("starts") or starts[-1] != len(postings.docs) or (state.bounds("tfs") or (1,))[0] < 1:
            raise ValueError("postings do not cut the documents into terms")
        bounds = starts.tolist()
        postings.span = {term: (a, b) for term, a, b in zip(terms, bounds, bounds[1:])}
        return postings


class Fitted(NamedTuple):
    """What scoring reads of a fitted rank-bm25 model: its idf (as the `idf` option made
    it), parameters and average document length. Kept instead of the model, whose
    per-document term dictionaries the postings replace."""

    idf: dict[str, float]
    k1: float
    b: float
    avgdl: float
    delta: float  # BM25L's and BM25+'s; unused under okapi
    corpus_size: int


def term_weights(bm25: Fitted, variant: str, term: str, postings: Postings, doc_len: np.ndarray) -> np.ndarray:
    """One query term's addition to every document's score, exactly as rank-bm25's
    `get_scores` computes it (the same operations in the same order, so the same floats):
    the formula for the documents holding the term, and its value at a term frequency of 0
    for the rest (0, except under BM25+, whose delta lower-bounds every document)."""
    idf = bm25.idf.get(term) or 0
    k1, b, avgdl = bm25.k1, bm25.b, bm25.avgdl
    absent = idf * bm25.delta if variant == "plus" else 0.0
    weights = np.full(len(doc_len), absent, dtype=np.float64)
    docs, q_freq = postings.of(term)
    dl = doc_len[docs]
    if variant == "okapi":
        weights[docs] = idf * (q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * dl / avgdl)))
    elif variant == "l":
        ctd = q_freq / (1 - b + b * dl / avgdl)
        weights[docs] = idf * q_freq * (k1 + 1) * (ctd + bm25.delta) / (k1 + ctd + bm25.delta)
    else:
        weights[docs] = idf * (bm25.delta + (q_freq * (k1 + 1)) / (k1 * (1 - b + b * dl / avgdl) + q_freq))
    return weights


def lucene_idf(n_docs: int, doc_freq: int) -> float:
    """log(1 + (N - n + 0.5) / (n + 0.5)): positive for every n <= N."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


@register("bm25", "rank-bm25 BM25 (okapi, l or plus) with Lucene's non-negative idf; stemmed, stopwords removed")
class RankBM25(RetrieverBase):
    kind = LEXICAL
    # Robertson & Zaragoza (2009), section 3.4: b in [0, 1] (0 no length normalization, 1
    # full) and k1 >= 0, but k1 = 0 is refused: rank-bm25's Okapi and Plus compute
    # tf (k1 + 1) / (tf + k1 ...) as 0 / 0 = NaN for every query term a document lacks. A
    # small k1 still comes as close to binary term frequency as wanted. make_retriever
    # checks these.
    OPTIONS = {"variant": choice(*VARIANTS), "k1": number(0, above=True), "b": number(0, 1),
               "idf": choice("lucene", "okapi"), "stopwords": boolean(), "stem": boolean()}

    def __init__(self, variant: str = "okapi", k1: float = 1.5, b: float = 0.75,
                 idf: str = "lucene", stopwords: bool = True, stem: bool = True):
        self.name = "bm25"
        self.variant, self.k1, self.b, self.idf_rule = variant, k1, b, idf
        self.analyzer = Analyzer(stopwords=stopwords, stem=stem)
        self.ids: list[str] = []
        self._bm25 = None
        self._postings: Postings | None = None

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        if not docs:  # rank-bm25 divides by the average length of an empty corpus
            self._bm25 = None
            return
        corpus = [self.analyzer(d.text) or ["\x00empty"] for d in docs]
        model = VARIANTS[self.variant](corpus, k1=self.k1, b=self.b)
        self._postings = Postings(model.doc_freqs)
        self._doc_len = np.array(model.doc_len)
        self._docs = DocIds(self.ids)
        idf = model.idf
        if self.idf_rule == "lucene":
            n = model.corpus_size
            df: dict[str, int] = {}
            for doc in corpus:
                for term in set(doc):
                    df[term] = df.get(term, 0) + 1
            idf = {t: lucene_idf(n, f) for t, f in df.items()}
        self._bm25 = Fitted(idf, model.k1, model.b, model.avgdl, getattr(model, "delta", 0.0), model.corpus_size)

    def state(self) -> State:
        state = State(meta={"documents": len(self.ids), "fitted": self._bm25 is not None})
        state.put_strings("ids", self.ids)
        if self._bm25 is not None:
            fitted = self._bm25
            state.meta.update(avgdl=fitted.avgdl, delta=fitted.delta, corpus_size=fitted.corpus_size)
            state.put_strings("idf.terms", list(fitted.idf))
            state.put("idf.values", np.array(list(fitted.idf.values()), dtype=np.float64))
            state.put("doc_len", self._doc_len)
            postings = State()
            self._postings.save(postings)
            state.nest("postings", postings)
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        ids = state.ids_of(docs)
        self.ids, self._docs, self._bm25 = ids, shared_doc_ids(ids), None
        if not state.meta.get("fitted") or not ids:
            return
        terms = state.strings("idf.terms")
        idf = dict(zip(terms, state.array("idf.values", "f", 1, len(terms)).tolist()))
        self._doc_len = state.array("doc_len", "if", 1, len(ids))
        self._postings = Postings.load(state.inner("postings"), len(ids))
        self._bm25 = Fitted(idf, self.k1, self.b, float(state.number("avgdl", 0)), float(state.number("delta")),
                            int(state.number("corpus_size", 1)))

    def score(self, query: str) -> ArrayScores | dict[str, float]:
        """rank-bm25's `get_scores` (computed from postings: `term_weights`), every
        document it scores non-zero."""
        if self._bm25 is None:
            return {}
        terms = [t for t in self.analyzer(query) if t in self._bm25.idf]
        if not terms or not self.ids:
            return {}
        scores = np.zeros(len(self.ids))
        for term in terms:  # summed in query order, as get_scores sums
            scores += term_weights(self._bm25, self.variant, term, self._postings, self._doc_len)
        return self._docs.scores(scores, scores != 0)

    def ceiling(self, query: str) -> float:
        """The best score any document could reach for this query: each term saturated
        (tf -> infinity), sum of idf * (k1 + 1), and idf * (k1 + 1 + delta) under BM25+
        (Lv & Zhai 2011, "Lower-bounding term frequency normalization"). Dividing by it
        makes a score a fraction of the best match possible for the query rather than of
        the best match the store happens to hold. A query word the store has never seen
        counts at the highest idf (Lucene's, n = 0): it is the most informative word of all,
        and no record matches it. A term whose idf is negative (``idf="okapi"`` on a common
        word) adds nothing: the best a document can do there is not hold it.

        Under ``variant="l"`` it is a bound only for terms a document holds once:
        rank-bm25's BM25L multiplies the saturated term by the raw term frequency, so its
        scores grow without a bound that the query alone sets."""
        if self._bm25 is None:
            return 0.0
        saturated = self.k1 + 1 + (self._bm25.delta if self.variant == "plus" else 0.0)
        unseen = lucene_idf(self._bm25.corpus_size, 0)
        return sum(max(0.0, self._bm25.idf.get(t, unseen)) * saturated for t in self.analyzer(query))
