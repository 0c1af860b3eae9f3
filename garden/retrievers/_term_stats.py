"""A story's term statistics, saved beside its Milvus collection: what the structure reads
of the whole store without a search of every record.

`milvus-bm25` ranks in Milvus, which gives back the best records and their scores and no
idf. The structured pipeline needs more of the whole store than a ranking: a lexical
member's ceiling for a query (each term's idf, from its document frequency) and the score
of a record Milvus did not return (a candidate another member or the story's structure
brought, the query's content words rather than all of it). Both follow from the numbers
BM25 itself is made of (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework:
BM25 and Beyond"): the number of records N, each term's document frequency n, the total
length, and a record's own terms:

    score(d, q) = sum over q's terms t (a repeated one each time) of
                  idf(t) * tf(t, d) (k1 + 1) / (tf(t, d) + k1 (1 - b + b |d| / avgdl))
    idf(t) = log(1 + (N - n + 0.5) / (n + 0.5))        (Lucene's, as `bm25` and Milvus)

They are counted once, when the story is indexed, with the analysis Milvus was given, and
saved (arrays and JSON, `garden._state`) under the collection's name: a later process
reads them instead of analysing every record again.
"""
from __future__ import annotations

import os
import stat
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from garden._state import State, read_state, write_state
from garden.derived.home import derived_folder, distrust, refuse_link, write_whole
from garden.retrievers.bm25 import lucene_idf

KIND = "milvus:term-statistics"


class TermStatistics:
    """N, the total length and each term's document frequency of one story's records."""

    def __init__(self, documents: int = 0, length: int = 0, df: Counter | None = None):
        self.documents, self.length = documents, length
        self.df: Counter = df if df is not None else Counter()

    @classmethod
    def count(cls, texts: Iterable[str], words: Callable[[str], list[str]]) -> TermStatistics:
        """The statistics of `texts`, each made into terms by `words`."""
        stats = cls()
        for text in texts:
            terms = words(text)
            stats.documents += 1
            stats.length += len(terms)
            stats.df.update(set(terms))
        return stats

    @property
    def avgdl(self) -> float:
        return self.length / self.documents if self.documents else 0.0

    def idf(self, term: str) -> float:
        return lucene_idf(self.documents, self.df.get(term, 0))

    def ceiling(self, terms: Sequence[str], k1: float) -> float:
        """sum of idf x (k1 + 1) over `terms`, an unseen term at the highest idf; 0 for no records."""
        if not self.documents:
            return 0.0
        return sum(self.idf(t) * (k1 + 1) for t in terms)

    def bm25(self, query: Sequence[str], records: Sequence[tuple[str, Sequence[str]]], k1: float,
             b: float) -> dict[str, float]:
        """Each record's BM25 for the query terms (the module's formula), the records that
        hold at least one of them."""
        if not self.documents or not query:
            return {}
        avgdl = self.avgdl or 1.0
        weights = [(t, self.idf(t)) for t in query if self.df.get(t, 0)]
        out: dict[str, float] = {}
        for rid, terms in records:
            counts = Counter(terms)
            norm = k1 * (1 - b + b * len(terms) / avgdl)
            score = sum(w * counts[t] * (k1 + 1) / (counts[t] + norm) for t, w in weights if counts[t])
            if score:
                out[rid] = score
        return out

    # --- saved beside the collection ---------------------------------------------------

    def state(self) -> State:
        state = State(meta={"documents": self.documents, "length": self.length})
        state.put_strings("terms", list(self.df))
        state.put("df", np.fromiter(self.df.values(), dtype=np.int64, count=len(self.df)))
        return state

    @classmethod
    def from_state(cls, state: State) -> TermStatistics:
        terms = state.strings("terms")
        df = state.array("df", "i", 1, len(terms))
        documents, length = int(state.number("documents", 0)), int(state.number("length", 0))
        if len(set(terms)) != len(terms) or (df < 1).any() or (df > documents).any():
            raise ValueError("document frequencies do not fit the records")
        return cls(documents, length, Counter(dict(zip(terms, df.tolist()))))


def saved_path(collection: str) -> Path:
    """Where the statistics of `collection` are kept: the garden home's index folder."""
    return derived_folder("index") / f"{collection}.stats.npz"


def load(collection: str) -> TermStatistics | None:
    """The saved statistics of `collection`, or None when there are none this user owns
    and no one else may write (anything else is left unread and counted again)."""
    path = saved_path(collection)
    try:
        refuse_link(path)
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if distrust(st) is not None or not stat.S_ISREG(st.st_mode):
                return None
            return TermStatistics.from_state(read_state(fh, KIND, "TermStatistics"))
    except Exception:  # missing, torn or not ours: counted again, and saved anew
        return None


def save(collection: str, stats: TermStatistics) -> None:
    """Written whole (0600) or not at all; a failure costs a recount in the next process."""
    try:
        path = saved_path(collection)
        write_whole(path, lambda out: write_state(out, KIND, "TermStatistics", stats.state()))
    except (OSError, ValueError):
        pass


def forget(collection: str) -> None:
    """Remove the statistics of a collection that was dropped."""
    try:
        saved_path(collection).unlink(missing_ok=True)
    except OSError:
        pass
