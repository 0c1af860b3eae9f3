"""`tfidf`: cosine similarity of scikit-learn tf-idf vectors.

Salton & Buckley (1988), "Term-weighting approaches in automatic text retrieval".
scikit-learn's TfidfVectorizer weights tf * (1 + log((1 + N) / (1 + n))) and L2-normalizes
each row, so a dot product of two rows is their cosine. ``analyzer="word"`` indexes the
terms of the shared garden analyzer, the same terms the BM25 retrievers see;
``analyzer="char"`` indexes character n-grams inside word boundaries (scikit-learn's
``char_wb``), which tolerates misspellings and needs no stemmer.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from garden.analyzer import Analyzer
from garden.retrievers import LEXICAL, Doc, DocIds, RetrieverBase, State, boolean, choice, custom, register

NGRAM_WORDS = "LOW-HIGH whole numbers with 1 <= LOW <= HIGH (say 3-5), or one N for N-N"


def _ngram_text(text: str) -> tuple[int, int]:
    """`3-5` or `4` (a spec cannot hold a tuple, and a comma would split a pipeline list)."""
    low, sep, high = text.partition("-")
    return _ngram_value((low, high if sep else low))


def _ngram_value(value) -> tuple[int, int]:
    if isinstance(value, str) or len(value) != 2:
        raise ValueError("not a pair")
    low, high = (int(n) if isinstance(n, str) and n.isascii() and n.isdigit() else n for n in value)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (low, high)) or not 1 <= low <= high:
        raise ValueError("not an n-gram range")
    return low, high


@register("tfidf", "scikit-learn tf-idf cosine over the garden analyzer's words, or char n-grams (analyzer=char)")
class TfidfRetriever(RetrieverBase):
    kind = LEXICAL
    # make_retriever checks these; ngram_range is scikit-learn's (min_n, max_n), used by char only
    OPTIONS = {"analyzer": choice("word", "char"),
               "ngram_range": custom(NGRAM_WORDS, _ngram_text, _ngram_value),
               "sublinear_tf": boolean(), "stopwords": boolean(), "stem": boolean()}

    def __init__(self, analyzer: str = "word", ngram_range: tuple[int, int] = (3, 5),
                 sublinear_tf: bool = False, stopwords: bool = True, stem: bool = True):
        self.name = "tfidf"
        self.analyzer_kind = analyzer
        self.ngram_range = tuple(ngram_range)
        self.sublinear_tf = sublinear_tf
        self.words = Analyzer(stopwords=stopwords, stem=stem)
        self.ids: list[str] = []
        self._docs = DocIds()
        self._vectorizer = None  # a fitted TfidfVectorizer: char n-grams' transform (and a fresh fit)
        self._vocabulary: dict[str, int] | None = None   # term -> column; None: nothing fitted
        self._idf = np.zeros(0)
        self._csr = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))  # documents x terms
        self._by_term = self._csr   # the same matrix by term (columns), for a query's terms

    def _new_vectorizer(self):
        # imported here: loading scikit-learn costs over a second, and the registry loads
        # every retriever module to list their names
        from sklearn.feature_extraction.text import TfidfVectorizer

        if self.analyzer_kind == "word":
            return TfidfVectorizer(analyzer=self.words, sublinear_tf=self.sublinear_tf, dtype=np.float64)
        return TfidfVectorizer(analyzer="char_wb", ngram_range=self.ngram_range, lowercase=True,
                               sublinear_tf=self.sublinear_tf, dtype=np.float64)

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        self._docs = DocIds(self.ids)
        vectorizer = self._new_vectorizer()
        try:
            matrix = vectorizer.fit_transform([d.text for d in docs]).tocsr()
        except ValueError:  # no document has a single term: nothing can match
            self._vectorizer, self._vocabulary = None, None
            return
        matrix.sort_indices()
        self._fitted(vectorizer.vocabulary_, vectorizer.idf_, matrix.data, matrix.indices, matrix.indptr,
                     vectorizer)

    def _fitted(self, vocabulary, idf, data, indices, indptr, vectorizer=None) -> None:
        """Keep a fit: the vocabulary, the idf and the document matrix (CSR arrays, rows of
        unit length), and the matrix again by term, so a query's terms find their documents
        without scipy. Only char n-grams keep scikit-learn's vectorizer to cut a query."""
        self._vocabulary = dict(vocabulary)
        self._idf = np.asarray(idf, dtype=np.float64)
        data, indices, indptr = (np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int64),
                                 np.asarray(indptr, dtype=np.int64))
        self._csr = (data, indices, indptr)
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        order = np.argsort(indices, kind="stable")          # by term, each term's documents in order
        starts = np.concatenate([[0], np.cumsum(np.bincount(indices, minlength=len(self._idf)))])
        self._by_term = (data[order], rows[order], starts)
        self._vectorizer = vectorizer if self.analyzer_kind != "word" else None

    def state(self) -> State:
        """The fitted vocabulary and idf (all scikit-learn's `transform` reads of a fitted
        vectorizer) and the document matrix as its three CSR arrays."""
        state = State(meta={"fitted": self._vocabulary is not None})
        state.put_strings("ids", self.ids)
        if self._vocabulary is not None:
            state.put_strings("vocab.terms", list(self._vocabulary))
            state.put("vocab.columns", np.array(list(self._vocabulary.values()), dtype=np.int64))
            state.put("idf", self._idf)
            for part, array in zip(("data", "indices", "indptr"), self._csr):
                state.put(f"matrix.{part}", array)
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        ids = state.ids_of(docs)
        self.ids, self._docs = ids, DocIds(ids)
        self._vectorizer, self._vocabulary = None, None
        if not state.meta.get("fitted"):
            return
        terms = state.strings("vocab.terms")
        columns = state.positions("vocab.columns", len(terms), len(terms))
        if len(set(columns.tolist())) != len(terms):
            raise ValueError("array 'vocab.columns' names a column twice")
        idf = state.array("idf", "f", 1, len(terms))
        indptr = state.positions("matrix.indptr", 1 << 62, len(ids) + 1)
        data = state.array("matrix.data", "f", 1, int(indptr[-1]))
        indices = state.positions("matrix.indices", len(terms), len(data))
        if indptr[0] != 0 or (np.diff(indptr) < 0).any():
            raise ValueError("array 'matrix.indptr' does not cut the matrix into rows")
        vocabulary = dict(zip(terms, columns.tolist()))
        vectorizer = None
        if self.analyzer_kind != "word":   # char n-grams are cut by scikit-learn's own analyzer
            vectorizer = self._new_vectorizer()
            vectorizer.vocabulary_, vectorizer.fixed_vocabulary_, vectorizer.idf_ = vocabulary, False, idf
        self._fitted(vocabulary, idf, data, indices, indptr, vectorizer)

    def query_vector(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's tf-idf vector as (columns, ascending; weights), computed as
        scikit-learn's `transform` computes it, to the last bit: counts of the analyzer's
        terms in the vocabulary, 1 + log of each when sublinear, times idf, then divided by
        the L2 norm summed term by term in column order (`inplace_csr_row_normalize_l2`)."""
        if self._vectorizer is not None:
            row = self._vectorizer.transform([query])
            row.sort_indices()
            return np.asarray(row.indices, dtype=np.int64), np.asarray(row.data, dtype=np.float64)
        counts: dict[int, int] = {}
        for term in self.words(query):
            column = self._vocabulary.get(term)
            if column is not None:
                counts[column] = counts.get(column, 0) + 1
        columns = np.array(sorted(counts), dtype=np.int64)
        weights = np.array([counts[c] for c in columns.tolist()], dtype=np.float64)
        if self.sublinear_tf:
            weights = np.log(weights) + 1.0
        weights = weights * self._idf[columns]
        total = 0.0
        for w in weights.tolist():
            total += w * w
        if total != 0.0:
            weights = weights / np.sqrt(total)
        return columns, weights

    def _similarity(self, query: str) -> np.ndarray:
        """Every document's cosine with the query, summed term by term in column order, as
        scipy's sparse product sums it (so the figures are scikit-learn's exactly)."""
        columns, weights = self.query_vector(query)
        data, rows, starts = self._by_term
        spans = [(int(starts[c]), int(starts[c + 1])) for c in columns.tolist()]
        if not spans:
            return np.zeros(len(self.ids))
        at = np.concatenate([rows[a:b] for a, b in spans])
        products = np.concatenate([w * data[a:b] for w, (a, b) in zip(weights.tolist(), spans)])
        return np.bincount(at, weights=products, minlength=len(self.ids))

    def score(self, query: str) -> dict[str, float]:
        return self.score_many([query])[0]

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        if self._vocabulary is None or not queries:
            return [{} for _ in queries]
        results = []
        for query in queries:
            sims = self._similarity(query)
            nonzero = np.flatnonzero(sims)
            results.append(dict(zip(self._docs.ids[nonzero].tolist(), sims[nonzero].tolist())))
        return results

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        if self._vocabulary is None or not queries:
            return [[] for _ in queries]
        results = []
        for query in queries:
            sims = self._similarity(query)
            results.append(self._docs.top(sims, k, np.flatnonzero(sims)))
        return results

    def ceiling(self, query: str) -> float:
        """1.0: a score is the cosine of two tf-idf vectors with no negative weight, so it
        is at most 1, reached by a document whose vector points the query's way."""
        return 1.0
