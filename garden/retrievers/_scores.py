"""Scores and rankings: the one order every retriever ranks in, and the finiteness check.

A ranking is best first with ties broken by id, so every run orders the same way whatever
order the documents came in. `rank` orders a mapping of scores; `top_k` gives the same list
from a score array without sorting every document in Python (the batched paths of `bm25s`,
`tfidf` and `dense` use it).
"""
from __future__ import annotations

import math
import numbers
from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError


def check_depth(k) -> None:
    """GardenError unless `k` is None (every document) or a whole number >= 0."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise GardenError(f"a ranking depth must be 0 or more, got {k}")


def rank(scores: Mapping[str, float], k: int | None = None) -> list[tuple[str, float]]:
    """Best first; ties broken by id so every run orders the same way."""
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return ordered if k is None else ordered[:k]


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
    if k == 0:
        return []
    if candidates is None:
        candidates = np.arange(len(scores))
    values = scores[candidates]
    if k is not None and len(candidates) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    best = np.lexsort((order[candidates], -values))[:k]
    return list(zip(ids[candidates[best]].tolist(), values[best].tolist()))


def check_finite(name: str, scores: Mapping[str, float]) -> None:
    """GardenError naming `name`, the record and the value if any score is not a finite
    number: IEEE 754 NaN compares false with everything, so one would misorder every
    ranking it touches in silence, and JSON (RFC 8259, section 6) cannot carry it."""
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
