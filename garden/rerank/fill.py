"""The fill stage: once a query is answered, what rides follows the evidence, not a count.

Without it each lane keeps at most `lane_cap` items (3), each beating the lane's own
rival by the standout ratio: a rule made for curated stores where one record answers. In a
conversation an answer is spread over several turns and the notes that cite them, and a
fixed three items left most of it out. With fill armed, every live item down to
`min_share` of the query's best score rides, in score order, and the budget is the bound
(pack.py); after a session delivered some items, a leftover must still beat the best
delivered one by the ratio (session.py). A query or case that sets `lane_cap` keeps it as
a count. Whether anything rides at all is the decide stage's (or the lanes' ratio's).
"""
from __future__ import annotations

from garden.rerank.context import PackRule, QueryContext, StageBase


class SkipShown(PackRule):
    """The fill stage's packing rule: with the evidence lane run deep, an evidence item that
    adds nothing the packet already shows is skipped (`already_shown`, pack.py's
    `adds_nothing`)."""

    skips_shown = True


SKIP_SHOWN = SkipShown()


class Fill(StageBase, name="fill", mode="selects", writes=("lane_rules", "pack_rules"),
           title="Fill: the scores say what rides",
           drawn="once answered, what rides follows the scores, bounded by the budget, not by a count",
           shown_with="lanes",
           armed="what rides follows the scores down to the share rule, bounded by the budget, not by a count."):
    """Arms the lanes' selection to let the scores, not a count, say what rides (`fill`), and its
    packing rule."""

    def run(self, ctx: QueryContext) -> None:
        ctx.lane_rules.fill = True
        ctx.pack_rules.append(SKIP_SHOWN)
