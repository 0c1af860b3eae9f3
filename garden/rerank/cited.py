"""The cited stage: a derived note or view that matches passes its score to what it cites.

An observation ("Caroline attended an LGBTQ support group") is written in the words a
question uses, while the turn it was drawn from ("I went to a LGBTQ support group
yesterday") may not be; a summary of a session says what the session was about. The
derived record's `sources` are the garden's provenance links, and this stage follows
them backwards: each record a live candidate cites receives

    cited_share * score(derived) / len(sources) ** cited_spread

(the largest such credit when several derived records cite it), from each of the query's
`candidates` best live records (`lenders`), and enters through the
eligibility check by the provenance door, on no certain route (scope and off-topic still apply to it).
A derived record citing a whole session spreads its credit thin. `cited_share` and
`cited_spread` were chosen by leave-one-conversation-out on LoCoMo
(experiments/locomo_weights.py).
The credit labels the source `provenance_supported`. Scores are read before any credit
is given, so the order candidates are visited in changes nothing.
"""
from __future__ import annotations

from garden.rerank.context import Setting, QueryContext, StageBase, give_credit, lenders

CITED_SHARE = Setting("cited_share", float, 1.0, "share of a derived record's score each source it cites receives",
                      ge=0)
CITED_SPREAD = Setting("cited_spread", float, 0.25, "the share is divided by (sources cited) ** cited_spread",
                       ge=0, le=1)

# A note or a view restates raw material in other words, so the record it cites is the
# evidence; a state or a decision is the curated answer itself, its sources its support,
# which the provenance stage packs behind it (crediting them would let a transcript
# outrank the decision it led to).
DERIVED_KINDS = ("note", "view")


def citation_credit(score: float, cited: int, share: float, spread: float) -> float:
    """What each of `cited` sources receives from a derived record scoring `score`."""
    return share * score / cited ** spread if cited else 0.0


class Cited(StageBase, name="cited", settings=(CITED_SHARE, CITED_SPREAD), needs=("candidates",),
            writes=("candidates",), labels=("provenance_supported",), supports=("provenance_supported",),
            title="Cited: notes and views credit what they cite",
            drawn="a matching note or view credits the records it cites"):
    def run(self, ctx: QueryContext) -> None:
        share, spread = ctx.settings.cited_share, ctx.settings.cited_spread
        if share <= 0:
            return
        story = ctx.spec.story
        credit: dict[str, tuple[float, str]] = {}
        for c in lenders(ctx):
            sources = [s for s in c.record.sources if s in story.by_id]
            if not sources or c.record.kind not in DERIVED_KINDS:
                continue
            given = citation_credit(c.score, len(sources), share, spread)
            for sid in sources:
                if given > credit.get(sid, (0.0, ""))[0]:
                    credit[sid] = (given, c.id)
        # lent, not the source's own match: the neighbours stage does not pass it on
        give_credit(ctx, credit, "provenance", "provenance_supported", "cited by {by}, which matches the query",
                    borrowed=True)
