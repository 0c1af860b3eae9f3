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
        self._vectorizer = None  # a fitted TfidfVectorizer
        self._matrix = None  # documents x terms, CSR, rows of unit length

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
        self._vectorizer = self._new_vectorizer()
        try:
            self._matrix = self._vectorizer.fit_transform([d.text for d in docs]).tocsr()
        except ValueError:  # no document has a single term: nothing can match
            self._vectorizer, self._matrix = None, None

    def state(self) -> State:
        """The fitted vocabulary and idf (all scikit-learn's `transform` reads of a fitted
        vectorizer) and the document matrix as its three CSR arrays."""
        state = State(meta={"fitted": self._vectorizer is not None})
        state.put_strings("ids", self.ids)
        if self._vectorizer is not None:
            vocabulary = self._vectorizer.vocabulary_
            state.put_strings("vocab.terms", list(vocabulary))
            state.put("vocab.columns", np.array(list(vocabulary.values()), dtype=np.int64))
            state.put("idf", self._vectorizer.idf_)
            for part in ("data", "indices", "indptr"):
                state.put(f"matrix.{part}", getattr(self._matrix, part))
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        from scipy.sparse import csr_matrix

        ids = state.ids_of(docs)
        self.ids, self._docs = ids, DocIds(ids)
        self._vectorizer, self._matrix = None, None
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
        vectorizer = self._new_vectorizer()
        vectorizer.vocabulary_ = dict(zip(terms, columns.tolist()))
        vectorizer.fixed_vocabulary_ = False
        vectorizer.idf_ = idf
        self._vectorizer = vectorizer
        self._matrix = csr_matrix((data, indices, indptr), shape=(len(ids), len(terms)))

    def _similarities(self, queries: Sequence[str]):
        """queries x documents cosine, sparse: only documents sharing a term are stored."""
        return (self._vectorizer.transform(list(queries)) @ self._matrix.T).tocsr()

    def score(self, query: str) -> dict[str, float]:
        return self.score_many([query])[0]

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        if self._vectorizer is None or not queries:
            return [{} for _ in queries]
        sims = self._similarities(queries)
        results = []
        for row in range(sims.shape[0]):
            start, end = sims.indptr[row], sims.indptr[row + 1]
            cols, values = sims.indices[start:end], sims.data[start:end]
            nonzero = values != 0
            results.append(dict(zip(self._docs.ids[cols[nonzero]].tolist(), values[nonzero].tolist())))
        return results

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        if self._vectorizer is None or not queries:
            return [[] for _ in queries]
        sims = self._similarities(queries)
        results = []
        for row in range(sims.shape[0]):
            dense = sims.getrow(row).toarray().ravel()
            results.append(self._docs.top(dense, k, np.flatnonzero(dense)))
        return results

    def ceiling(self, query: str) -> float:
        """1.0: a score is the cosine of two tf-idf vectors with no negative weight, so it
        is at most 1, reached by a document whose vector points the query's way."""
        return 1.0
