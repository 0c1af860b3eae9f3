"""The standout ratio: does this lane have anything that stands out at all?

Within one lane, after reranking, ``ratio = best / rival``. The rival is the best score
that will not ride anyway: the first item past the per-lane cap. While the cutoff is
active the rival is floored at the best score this query gives an item already delivered
earlier in the session, so that leftovers of a drained store cannot ride on tiny scores.
It is a ratio, not a threshold, because scores are not comparable across queries, lanes or
corpora: dividing by another score of the same query cancels the scale.

An item rides only when its own score beats the rival by the same ratio, so the lane's
best does not carry weak neighbours in with it; and, whatever the ratio, an item scoring
under `min_share` of the best score (the lane's, or `share_of` when the caller ranks
several lanes with one scoring function) is cut by rank, because with nothing held back
(a small lane, rival 0) the ratio alone would let near-zero neighbours ride.
``standout = 1`` turns the cutoff off; the share rule stays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .models import check_standout

DEFAULT_STANDOUT = 1.4
DEFAULT_LANE_CAP = 3
DEFAULT_MIN_SHARE = 0.2


def _ratio(best: float, rival: float) -> float:
    if best <= 0:
        return 0.0
    return math.inf if rival <= 0 else best / rival


def standout_ratio(scores: list[float], cap: int = DEFAULT_LANE_CAP, floor: float = 0.0) -> tuple[float, float]:
    """(ratio, rival) for scores sorted best first.

    rival = max(scores[cap], floor), or the floor alone when nothing is held back;
    ratio = scores[0] / rival (infinite when the rival is zero).
    """
    if cap < 1:
        raise ValueError(f"the per-lane cap must be at least 1, got {cap}")
    if any(a < b for a, b in zip(scores, scores[1:])):
        raise ValueError("scores must be sorted best first")
    if not scores:
        return 0.0, floor
    rival = max(scores[cap] if len(scores) > cap else 0.0, floor)
    return _ratio(scores[0], rival), rival


@dataclass
class LaneDecision:
    riding: list[str]
    below_standout: list[str]
    rank_cut: list[str]
    trace: dict


def gate_lane(lane: str, ranked: list[tuple[str, float]], standout: float = DEFAULT_STANDOUT,
              cap: int = DEFAULT_LANE_CAP, delivered_floor: float = 0.0,
              min_share: float = DEFAULT_MIN_SHARE, share_of: float | None = None) -> LaneDecision:
    """Decide which of a ranked lane ride. `ranked` is best first, ties already by id."""
    standout = check_standout(standout)
    active = standout > 1.0
    floor = delivered_floor if active else 0.0
    ratio, rival = standout_ratio([s for _, s in ranked], cap, floor)
    answers = (not active) or ratio >= standout
    riding, below, cut = [], [], []
    best = ranked[0][1] if ranked else 0.0
    reference = max(best, share_of or 0.0)
    for i, (rid, score) in enumerate(ranked):
        if i >= cap or (reference > 0 and score < min_share * reference):
            cut.append(rid)
        elif not answers or (active and _ratio(score, rival) < standout):
            below.append(rid)
        elif score <= 0:  # the cutoff is off, and a zero score is no evidence at all
            cut.append(rid)
        else:
            riding.append(rid)
    trace = {"lane": lane, "standout": standout, "active": active, "best": best if ranked else None,
             "min_share": min_share, "share_of": reference,
             "rival": rival, "floor": floor, "ratio": None if math.isinf(ratio) else round(ratio, 4),
             "ratio_infinite": math.isinf(ratio), "answers": answers, "riding": riding}
    return LaneDecision(riding, below, cut, trace)
