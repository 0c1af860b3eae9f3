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

from garden.rerank.context import QueryContext, StageBase


class Fill(StageBase, name="fill", mode="selects", writes=("fill",), title="Fill: the scores say what rides"):
    def run(self, ctx: QueryContext) -> None:
        ctx.fill = True
