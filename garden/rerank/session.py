"""The session stage: what an earlier query of the session delivered is not served again.

Each earlier query runs under the same pipeline; the items it packed are rejected
`already_delivered`, and the best score this query gives one of them floors its lane's
rival in the standout ratio, so the leftovers of a drained store cannot ride on tiny
scores.
"""
from __future__ import annotations

from garden._deadline import check_deadline
from garden.rerank.context import QueryContext, StageBase


class Session(StageBase, name="session", needs=("candidates",), writes=("lane_rules",),
              reasons=("already_delivered",),
              title="Session: what was delivered is not served again",
              drawn="what the session delivered is not served again"):
    """The `session` stage: a query's session is the earlier queries of the person asking
    (`QuerySpec.session`), not a sitting of a conversation (the `sessions` stage's)."""

    def run(self, ctx: QueryContext) -> None:
        delivered: set[str] = set()
        for earlier in ctx.spec.session:
            check_deadline()   # each earlier query is a whole query again: a server's limit is checked between them
            delivered |= set(ctx.rerun(ctx.spec.earlier(earlier)).packet.ids())
        for rid in sorted(delivered):
            c = ctx.candidates.get(rid)
            if c is None:
                continue
            # the best score this query gives a delivered item floors its lane's rival (lanes.py)
            floor = ctx.lane_rules.floor
            floor[c.lane] = max(floor.get(c.lane, 0.0), c.score)
            c.reject("already_delivered", "packed earlier in this session")
