"""The standout ratio: does this lane have anything that stands out at all?

Within one lane, after reranking, ``ratio = best / rival``. The rival is the best score
that will not ride anyway: the first item past the per-lane cap. While the cutoff is
active the rival is floored at the best score this query gives an item already delivered
earlier in the session, so that leftovers of a drained store cannot ride on tiny scores.
It is a ratio, not a threshold, because scores are not comparable across queries, lanes or
corpora: dividing by another score of the same query cancels the scale.

A lane that holds nothing back of its own (no more candidates than the cap) borrows the
query's background as its rival: the first score past the cap with both lanes ranked
together, which one scoring function makes comparable. Without it a small lane's ratio is
unbounded and scattered single-word matches answer. An item rides only when its own score
beats the lane's own rival by the same ratio, so the lane's best does not carry weak
neighbours in with it; and, whatever the ratio, an item scoring
under `min_share` of the best score (the lane's, or `share_of` when the caller ranks
several lanes with one scoring function) is cut by rank, because with nothing held back
(a small lane, rival 0) the ratio alone would let near-zero neighbours ride.
``standout = 1`` turns the cutoff off; the share rule stays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from garden.models import check_standout
from garden.rerank.context import Setting, StageBase

# the standout stage's setting, and the lanes stage's two (lanes.py: the selection per lane is here)
STANDOUT = Setting("standout", float, 1.4, "how many times the best item must beat its first held-back rival "
                   "(the pi-canon default; experiments/standout_sweep.py shows why it stays)", check=check_standout)
LANE_CAP = Setting("lane_cap", int, 3, "items per lane before the rival", ge=1)
MIN_SHARE = Setting("min_share", float, 0.25, "under this share of the query's best an item is cut by rank "
                    "(experiments/locomo_gate.py)", ge=0, le=1)
DEFAULT_STANDOUT = STANDOUT.default
DEFAULT_LANE_CAP = LANE_CAP.default
DEFAULT_MIN_SHARE = MIN_SHARE.default


def _ratio(best: float, rival: float) -> float:
    if best <= 0:
        return 0.0
    return math.inf if rival <= 0 else best / rival


def standout_ratio(scores: list[float], cap: int = DEFAULT_LANE_CAP, floor: float = 0.0,
                   background: float = 0.0) -> tuple[float, float]:
    """(ratio, rival) for scores sorted best first.

    rival = max(scores[cap], floor), or max(background, floor) when the lane holds nothing
    back of its own; ratio = scores[0] / rival (infinite when the rival is zero).
    """
    if cap < 1:
        raise ValueError(f"the per-lane cap must be at least 1, got {cap}")
    if any(a < b for a, b in zip(scores, scores[1:])):
        raise ValueError("scores must be sorted best first")
    if not scores:
        return 0.0, floor
    rival = max(scores[cap] if len(scores) > cap else background, floor)
    return _ratio(scores[0], rival), rival


@dataclass
class LaneDecision:
    riding: list[str]
    below_standout: list[str]
    rank_cut: list[str]
    trace: dict


def select_lane(lane: str, ranked: list[tuple[str, float]], standout: float = DEFAULT_STANDOUT,
                cap: int = DEFAULT_LANE_CAP, delivered_floor: float = 0.0,
                min_share: float = DEFAULT_MIN_SHARE, share_of: float | None = None,
                background: float = 0.0, answers: bool | None = None, fill: bool = False,
                count_cap: int | None = DEFAULT_LANE_CAP, decisive: float = math.inf) -> LaneDecision:
    """Decide which of a ranked lane ride. `ranked` is best first, ties already by id.

    Whether the lane answers at all: `answers` when the decide stage gave a verdict for the
    query (or, against it, a ratio of at least `decisive`), else the lane's own ratio
    against `standout` (the cutoff off: always). What
    rides once it answers: with `fill`, every item down to `min_share` of the best (and,
    after a session delivered some, beating the delivered floor by the ratio), `count_cap`
    items at most (None: the budget is the bound); without it, at most `cap` items, each
    beating the lane's own rival by the ratio."""
    standout = check_standout(standout)
    active = standout > 1.0
    floor = delivered_floor if active else 0.0
    scores = [s for _, s in ranked]
    ratio, rival = standout_ratio(scores, cap, floor, background if active else 0.0)
    if not active:
        lane_answers = True
    elif answers is not None:
        lane_answers = answers or ratio >= decisive
    else:
        lane_answers = ratio >= standout
    # companions are measured against what this lane itself holds back (and the floor),
    # never against the background borrowed for the lane's own answer
    own_rival = floor if fill else standout_ratio(scores, cap, floor)[1]
    limit = count_cap if fill else cap
    riding, below, cut = [], [], []
    best = ranked[0][1] if ranked else 0.0
    reference = max(best, share_of or 0.0)
    for i, (rid, score) in enumerate(ranked):
        if (limit is not None and i >= limit) or (reference > 0 and score < min_share * reference):
            cut.append(rid)
        elif not lane_answers or (active and _ratio(score, own_rival) < standout):
            below.append(rid)
        elif score <= 0:  # the cutoff is off, and a zero score is no evidence at all
            cut.append(rid)
        else:
            riding.append(rid)
    trace = {"lane": lane, "standout": standout, "active": active, "best": best if ranked else None,
             "min_share": min_share, "share_of": reference,
             "rival": rival, "own_rival": own_rival, "background": background if active else 0.0,
             "floor": floor, "ratio": None if math.isinf(ratio) else round(ratio, 4),
             "ratio_infinite": math.isinf(ratio), "decided_by": "ratio" if answers is None or not active
             else "decide" if answers or ratio < decisive else "decisive ratio",
             "answers": lane_answers, "fill": fill, "count_cap": limit, "riding": riding}
    return LaneDecision(riding, below, cut, trace)


class Standout(StageBase, name="standout", settings=(STANDOUT,), mode="selects", writes=("lane_rules",),
               title="Standout: the ratio an item must beat its rival by",
               drawn="arms the per-lane cutoff at the standout ratio",
               step="cutoff", shown_with="lanes"):
    """The standout stage: arms the lanes' cutoff (`lane_rules.cutoff`) at the `standout`
    ratio. Without it the lanes run with the ratio off (1), keeping their cap and share rule."""

    def run(self, ctx) -> None:
        ctx.lane_rules.cutoff = ctx.settings.standout
