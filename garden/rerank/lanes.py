"""The lanes stage: states and decisions (curated) and everything else (evidence) are ranked
apart; each lane keeps what stands out (see standout.py): up to its cap, or, when the fill
stage armed it, as far down as the scores and the budget support.

The lanes' selection (`select_lane`, standout.py) takes what the selecting stages armed in
`ctx.lane_rules` (`LaneRules`), by its parameter: the cutoff ratio, 1 (off) unless the
standout stage armed it, so that removing the standout stage measures the ratio alone while
the cap and the share rule stay; `fill`, off unless the fill stage armed it; the session
stage's floor under each lane's rival. And the decide stage's verdict (`ctx.verdict`; none:
the lanes' ratio decides).
Items reached by a certain route ride without being selected.
"""
from __future__ import annotations

import math

from garden.rerank.candidates import by_score
from garden.rerank.context import QueryContext, StageBase
from garden.rerank.standout import LANE_CAP, MIN_SHARE, select_lane


def _silent(ctx: QueryContext, lane: dict, standout: float) -> str:
    """Why a lane answered nothing: the query's support (decide stage) or the lane's ratio."""
    d = ctx.verdict
    if lane["decided_by"] == "decide" and d is not None:
        return (f"support {d.support:.2f}, below this store's threshold {d.threshold:.2f}"
                f"{standing(d.standing)}; the lane's ratio {lane['ratio']} is short of {d.decisive:g}: "
                f"nothing in the store stands out as an answer (top {d.top:.3f}, held {d.held:.2f}, "
                f"known {d.known:.2f}, second {d.second:.3f}; level {d.level:.2f}, answer_at "
                f"{d.answer_at:g})")
    return f"the lane's ratio {lane['ratio']} is below standout {standout:g}"


def standing(found: dict | None) -> str:
    """Where a support falls in its store, in words: '' for a store without a reference."""
    if not found:
        return " (the global level: no reference of the store's own)"
    return (f": below {found['known_above']:.0%} of this store's known-item queries (questions it can "
            f"answer), above {found['foreign_below']:.0%} of its foreign questions")


def lane_cutoff(ctx: QueryContext) -> float:
    """The ratio the lanes' selection holds items to: the standout stage's, else 1 (off)."""
    return ctx.lane_rules.cutoff


class Lanes(StageBase, name="lanes", settings=(LANE_CAP, MIN_SHARE), essential=True, mode="selects",
            needs=("candidates",), reads=("lane_rules", "verdict"),
            writes=("curated", "evidence"), reasons=("below_standout", "rank_cut"),
            title="Standout: the gate per lane",
            drawn="states/decisions and evidence ranked apart; the decision, the share rule, the session floor",
            step="lanes", traced="standout"):
    def run(self, ctx: QueryContext) -> None:
        settings, cands = ctx.settings, ctx.candidates
        rules, verdict = ctx.lane_rules, ctx.verdict
        standout, fill, floor = lane_cutoff(ctx), rules.fill, rules.floor
        # no verdict: the lanes' own ratio decides
        answers, decisive = (None, math.inf) if verdict is None else (verdict.answers, verdict.decisive)
        trace = []
        riding = {}
        # One scoring function ranks both lanes, so the share rule measures an item against
        # the query's best item in either lane: a weak decision must not lead the packet
        # only because the curated lane is otherwise empty.
        live = sorted((c.score for c in cands.values() if c.reason is None and c.successor is None
                       and not c.certain), reverse=True)
        query_best = live[0] if live else 0.0
        # A lane that holds nothing back has no rival of its own; the query's background,
        # the first score past the cap in both lanes together, stands in for it.
        background = live[settings.lane_cap] if len(live) > settings.lane_cap else 0.0
        # with fill a count bounds a lane only when the query or case set one
        count_cap = settings.lane_cap if "lane_cap" in ctx.spec.settings.given() else None
        for lane in ("curated", "evidence"):
            members = [c for c in cands.values() if c.lane == lane and c.reason is None and c.successor is None]
            certain = [c for c in members if c.certain]
            ranked = by_score([c for c in members if not c.certain])
            decision = select_lane(lane, [(c.id, c.score) for c in ranked], standout, settings.lane_cap,
                                   floor.get(lane, 0.0), settings.min_share, query_best, background, answers,
                                   fill, count_cap, decisive)
            trace.append(decision.trace)
            rival = decision.trace["rival"]
            below, cut = set(decision.below_standout), set(decision.rank_cut)  # a lane can hold a thousand
            for position, c in enumerate(ranked):
                if c.id in below:
                    c.reject("below_standout", _silent(ctx, decision.trace, standout) if not decision.trace["answers"]
                             else f"{c.score:.4f} does not beat the rival "
                                  f"{decision.trace['own_rival'] if fill else rival:.4f} by {standout:g}")
                elif c.id in cut:
                    limit = decision.trace["count_cap"]
                    c.reject("rank_cut", f"past the lane cap of {limit}"
                             if limit is not None and position >= limit
                             else f"{c.score:.4f} is under {settings.min_share:g} of the query's best "
                                  f"{query_best:.4f}")
            keep = set(decision.riding)
            riding[lane] = by_score(certain + [c for c in ranked if c.id in keep])
        ctx.curated, ctx.evidence = riding["curated"], riding["evidence"]
        ctx.trace["standout"] = trace
