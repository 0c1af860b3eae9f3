"""The sessions stage: a turn of a session that matches the query as a whole rides higher.

A conversation is kept as sessions: the turns of one sitting, sharing a date and a title
(the rule `neighbours.py` reads: raw records, `source` or `chunk`, written one after
another with the same date and title). A question about someone's life is answered by a
sitting about it more often than by one stray line, and the best single turn of the right
session can lose to a turn of another session that happens to share the question's words.
So the sessions are ranked first, then the turns within them: each session's evidence is
the sum of its `SESSION_TOP` best candidates' embedding cosines (the base retriever's
semantic member; several turns that each mean something close to the question, not one
that repeats its words), the sessions are ordered by it, and each live candidate turn of the r-th session is
multiplied by

    ((SESSION_K + 1) / (SESSION_K + r)) ** session_weight

the reciprocal rank of its session (Cormack, Clarke & Buettcher 2009, "Reciprocal rank
fusion outperforms Condorcet and individual rank learning methods") as a share of the first
session's. The ranks, not the cosines, carry it: cosines are on no common scale across
queries or stores. A factor rather than a bonus: the first session's turns keep their
scores, so what the decide stage and the standout ratio read of the best candidate is its
own match, and a turn of a poorly matching session falls behind rather than everything
rising together; and the factor is kept on the candidate (`prior`), so the decide stage
reads every candidate's own match, not its place among the sessions.

Only candidates are read (what the retrieve stage found), so the stage brings nothing in of
its own and a store without sessions (a collection of documents, a curated story) or a
base retriever without a semantic member is left as it was. `session_weight` (2) was chosen
with the store's own voice's weight by the protocol of experiments/chat_protocol.py (both
development benchmarks, fourteen folds; every fold chose 2). Held out, LongMemEval's
sample gains in session nDCG@10 (0.865 to 0.884 with that weight), LoCoMo's seven
conversations move by a thousandth, not significantly (docs/longmemeval.md, "The protocol").
"""
from __future__ import annotations

from collections import defaultdict

from garden.derived.tables import numbers_codec, table
from garden.models import Record, Story
from garden.rerank.context import QueryContext, Setting, StageBase
from garden.rerank.neighbours import RAW_KINDS
from garden.retrievers import is_semantic

SESSION_WEIGHT = Setting("session_weight", float, 2.0, "a turn's score is multiplied by its session's reciprocal "
                         "rank as a share of the first's, to this power (sessions.py)", ge=0)
SESSION_K = 60          # reciprocal rank fusion's constant (Cormack et al. 2009)
SESSION_TOP = 3         # a session's evidence: its best candidates' cosines, this many summed


class SessionCount:
    """The rule above, folded record by record in the story's order
    (garden/derived/tables.py): record id -> the number of its session from 1, for the
    records that sit in one."""

    def __init__(self, story: Story):
        self.key, self.number = None, 0
        self.found: dict[str, int] = {}

    def add(self, record: Record) -> None:
        if record.kind not in RAW_KINDS or record.title is None:
            return   # a control, or a note between two turns of a sitting, does not end it
        if (record.kind, record.at, record.title) != self.key:
            self.key, self.number = (record.kind, record.at, record.title), self.number + 1
        self.found[record.id] = self.number

    def value(self) -> dict[str, int]:
        return self.found


SESSIONS = table("sessions", SessionCount, numbers_codec("i"))


def sessions(story: Story) -> dict[str, int]:
    """Record id -> the number of its session, for the raw records that sit in one (see the
    module docstring); remembered on the story, and saved."""
    return SESSIONS.of(story)


def session_ranks(cosines: dict[int, list[float]]) -> dict[int, int]:
    """Session -> its rank from 1, by the sum of its `SESSION_TOP` best cosines, ties by
    session number (the story's order)."""
    evidence = {s: sum(sorted(v, reverse=True)[:SESSION_TOP]) for s, v in cosines.items()}
    ordered = sorted(evidence, key=lambda s: (-evidence[s], s))
    return {s: rank for rank, s in enumerate(ordered, 1)}


class SittingRanks(StageBase, name="sessions", settings=(SESSION_WEIGHT,), needs=("candidates",),
                  writes=("candidates",), title="Sessions: the session that matches as a whole, then its turns",
                  tables=(SESSIONS,),
                  drawn="the sittings ranked by their turns' meaning; each turn times its sitting's reciprocal rank"):
    """The `sessions` stage (its name is the benchmarks' word for a sitting): the sittings
    ranked by their turns' meaning, and each turn times its sitting's reciprocal rank."""

    def run(self, ctx: QueryContext) -> None:
        weight = ctx.settings.session_weight
        semantic = [name for name, member in ctx.retriever.members().items() if is_semantic(member)]
        if weight <= 0 or not semantic:
            return
        session_of = sessions(ctx.spec.story)
        if not session_of:
            return
        live = [c for c in ctx.candidates.values() if c.reason is None and c.id in session_of]
        cosines: dict[int, list[float]] = defaultdict(list)
        for c in live:
            cosines[session_of[c.id]].append(max(c.scores.get(name, 0.0) for name in semantic))
        ranks = session_ranks(cosines)
        for c in sorted(live, key=lambda c: c.id):
            rank = ranks[session_of[c.id]]
            factor = ((SESSION_K + 1) / (SESSION_K + rank)) ** weight
            c.score *= factor
            c.prior *= factor
            if rank > 1:
                c.why.append(f"its session ranks {rank} of {len(ranks)} as a whole (x{factor:.3f})")
        ctx.trace["sessions"] = {"ranked": len(ranks)}
