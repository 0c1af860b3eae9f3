"""One check for two rankings that two code paths computed (numpy's and Milvus's inner
products, a batch and a single query): the same scores, position by position, within a
stated tolerance, and the same ids except where two scores are closer than it, since float
sums in another order may swap a near-tie."""
from __future__ import annotations

from typing import Sequence

TOLERANCE = 1e-5  # float32 inner products of 384 dimensions, summed in another order


def assert_same_ranking(ours: Sequence[tuple[str, float]], theirs: Sequence[tuple[str, float]],
                        tolerance: float = TOLERANCE, label: str = "") -> None:
    assert len(ours) == len(theirs), label
    scores = dict(ours)
    for place, ((rid, score), (other, other_score)) in enumerate(zip(ours, theirs)):
        assert abs(score - other_score) <= tolerance, (label, place, rid, other)
        # another id only in a near-tie: it scores, by our count, within the tolerance of ours
        assert other == rid or abs(scores.get(other, other_score) - score) <= tolerance, (label, place, rid, other)
