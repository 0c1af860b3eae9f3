"""Scores and rankings: the one order every retriever ranks in, and the finiteness check.

A ranking is best first with ties broken by id, so every run orders the same way whatever
order the documents came in. `rank` orders a mapping of scores; `top_k` gives the same list
from a score array without sorting every document in Python (the batched paths of `bm25s`,
`tfidf` and `dense` use it).
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError


class DocIds:
    """An index's document ids as arrays, made once at indexing and shared by every score it
    gives: `ids` (an object array, in index order), `order` (`id_order`: the tie-breaker
    `rank` uses) and `positions` (id -> index, made on first use)."""

    def __init__(self, ids: Sequence[str] = (), order: np.ndarray | None = None):
        ids = list(ids)
        self.ids = np.array(ids, dtype=object)
        self.order = id_order(ids) if order is None else order

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        return {rid: i for i, rid in enumerate(self.ids.tolist())}

    def scores(self, array: np.ndarray, kept: np.ndarray | None = None) -> ArrayScores:
        return ArrayScores(self, array, kept)

    def top(self, scores: np.ndarray, k: int | None, candidates: np.ndarray | None = None) -> list[tuple[str, float]]:
        """`top_k` of a score array over these ids."""
        return top_k(scores, self.ids, self.order, k, candidates)

    def same_ids(self, other: DocIds) -> bool:
        """Whether `other` holds the same ids in the same order (two retrievers indexed on
        the same documents): compared once per pair, then remembered."""
        if other is self:
            return True
        seen = self.__dict__.setdefault("_same", {})
        known = seen.get(id(other))
        if known is None or known[0] is not other:
            known = seen[id(other)] = (other, bool(np.array_equal(self.ids, other.ids)))
        return known[1]


class ArrayScores(Mapping):
    """A retriever's scores of every indexed document, kept as the array they were computed
    in and read as a mapping of id -> score. Only the documents `kept` are keys (every one
    when `kept` is None): a lexical retriever keeps those it scores non-zero, as its dict
    did. At a hundred thousand records, a dict of every score costs more than the whole
    rest of a query; the stages read a few dozen candidates' scores, and `rank`,
    `check_finite` and the normalizations of `relevance` work on the array directly."""

    __slots__ = ("docs", "array", "kept")

    def __init__(self, docs: DocIds, array: np.ndarray, kept: np.ndarray | None = None):
        self.docs, self.array, self.kept = docs, array, kept

    def __getitem__(self, rid: str) -> float:
        i = self.docs.positions[rid]
        if self.kept is not None and not self.kept[i]:
            raise KeyError(rid)
        return float(self.array[i])

    def get(self, rid: str, default=None):
        # Mapping.get, without its exception on a miss: the stages read every candidate's
        # score of every member, hundreds a query
        i = self.docs.positions.get(rid)
        if i is None or (self.kept is not None and not self.kept[i]):
            return default
        return float(self.array[i])

    def __contains__(self, rid: object) -> bool:
        i = self.docs.positions.get(rid)
        return i is not None and (self.kept is None or bool(self.kept[i]))

    def _kept(self, array: np.ndarray) -> np.ndarray:
        return array if self.kept is None else array[self.kept]

    def __iter__(self):
        return iter(self._kept(self.docs.ids).tolist())

    def __len__(self) -> int:
        return len(self.array) if self.kept is None else int(np.count_nonzero(self.kept))

    def items(self):
        return zip(self._kept(self.docs.ids).tolist(), self._kept(self.array).tolist())

    def values(self) -> list[float]:
        return self._kept(self.array).tolist()

    def derived(self, values: np.ndarray, keep: np.ndarray) -> ArrayScores:
        """New scores on the same index: `values`, keeping only where `keep` (and where
        these scores keep)."""
        return ArrayScores(self.docs, values, keep if self.kept is None else keep & self.kept)

    def ranked(self, k: int | None) -> list[tuple[str, float]]:
        """`rank(self, k)`, computed on the array (`top_k`)."""
        return self.docs.top(self.array, k, None if self.kept is None else np.flatnonzero(self.kept))

    def ranked_positions(self, k: int | None) -> np.ndarray:
        """The positions `ranked(k)` lists, in its order."""
        return top_positions(self.array, self.docs.order, k, None if self.kept is None else np.flatnonzero(self.kept))

    def all_finite(self) -> bool:
        return bool(np.isfinite(self._kept(self.array)).all())


def column(scores: Mapping[str, float], ids: Sequence[str], default: float = 0.0) -> list[float]:
    """`[scores.get(rid, default) for rid in ids]`, read off the array at once when the
    scores are an `ArrayScores` (a query reads hundreds of candidates' scores)."""
    if not isinstance(scores, ArrayScores) or not ids:
        return [scores.get(rid, default) for rid in ids]
    positions = scores.docs.positions
    at = np.fromiter((positions.get(rid, -1) for rid in ids), dtype=np.int64, count=len(ids))
    found = at >= 0
    at[~found] = 0
    if scores.kept is not None:
        found &= scores.kept[at]
    return np.where(found, scores.array[at], default).tolist()


def member_scores(members: Mapping[str, Mapping[str, float]], ids: Sequence[str]) -> list[dict[str, float]]:
    """Each id's score under each member (`{member: score}`, 0 where it has none), every
    member's column read off at once (`column`)."""
    columns = {name: column(scores, ids) for name, scores in members.items()}
    return [{name: values[n] for name, values in columns.items()} for n in range(len(ids))]


def check_depth(k) -> None:
    """GardenError unless `k` is None (every document) or a whole number >= 0."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise GardenError(f"a ranking depth must be 0 or more, got {k}")


def rank(scores: Mapping[str, float], k: int | None = None) -> list[tuple[str, float]]:
    """Best first; ties broken by id so every run orders the same way."""
    if isinstance(scores, ArrayScores):
        return scores.ranked(k)
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return ordered if k is None else ordered[:k]


_SHARED: dict[int, tuple[list, DocIds]] = {}
SHARED_LIMIT = 16


def shared_doc_ids(ids: list[str], order: np.ndarray | None = None) -> DocIds:
    """One `DocIds` for one list of ids (the same list object): indexes loaded on the same
    documents (a fusion's members, the phrase index) share its arrays and its id -> position
    map instead of each making them. `order`, when the caller has it saved, is `id_order(ids)`."""
    found = _SHARED.get(id(ids))
    if found is not None and found[0] is ids:
        return found[1]
    docs = DocIds(ids, order)
    _SHARED[id(ids)] = (ids, docs)   # the list kept with it: its id is not reused while here
    while len(_SHARED) > SHARED_LIMIT:
        _SHARED.pop(next(iter(_SHARED)))
    return docs


def id_order(ids: Sequence[str]) -> np.ndarray:
    """Each id's position in sorted order: the tie-breaker `rank` uses, as an array."""
    order = np.empty(len(ids), dtype=np.int64)
    order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return order


def top_k(scores: np.ndarray, ids: np.ndarray, order: np.ndarray, k: int | None,
          candidates: np.ndarray | None = None) -> list[tuple[str, float]]:
    """`rank` over a score array: best first, ties by id, the same list `rank` gives for
    the dict of `candidates` (every document when None), without sorting all of them in
    Python. Only the scores at or above the k-th best are sorted."""
    check_depth(k)
    best = top_positions(scores, order, k, candidates)
    return list(zip(ids[best].tolist(), scores[best].tolist()))


def top_positions(scores: np.ndarray, order: np.ndarray, k: int | None,
                  candidates: np.ndarray | None = None) -> np.ndarray:
    """The positions `top_k` lists, best first, ties by `order`. No checks."""
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if candidates is None:
        candidates = np.arange(len(scores))
    values = scores[candidates]
    if k is not None and len(candidates) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    return candidates[np.lexsort((order[candidates], -values))[:k]]


def check_finite(name: str, scores: Mapping[str, float]) -> None:
    """GardenError naming `name`, the record and the value if any score is not a finite
    number: IEEE 754 NaN compares false with everything, so one would misorder every
    ranking it touches in silence, and JSON (RFC 8259, section 6) cannot carry it."""
    if isinstance(scores, ArrayScores) and scores.all_finite():
        return
    try:
        if all(map(math.isfinite, scores.values())):  # the common case: one pass, no Python loop body
            return
    except TypeError:
        pass  # a value that is not a number at all: found and named below
    for rid, value in scores.items():
        try:
            ok = math.isfinite(value)
        except TypeError:
            ok = False
        if not ok:
            raise GardenError(f"retriever {name}: record {rid} got the score {value!r}, which is not a finite number")
