"""The neighbours stage: a raw record next to a strong match shares in its score.

In a conversation the turn that answers a question is often the reply to the turn that
matches it ("What did you do last weekend?" / "We went camping."), and a chunk of a
document is read with the chunks beside it. A record's neighbours are the records written
next to it in the story, in the story's order, that are raw material of the same kind
(`source` or `chunk`) with the same date and the same title: the turns of one session, the
chunks of one document. A record without a title has no neighbours: records that merely
sit next to each other in a file (the documents of a collection) are not a sequence. Each such record receives

    context_share * (the larger of its two neighbours' scores)

from each of the query's `candidates` best live records (`lenders`), and enters through
the eligibility check by the `neighbour` door, on no certain route. A record lends its own match only:
scores are read before any credit is given, and without what the record was itself lent
(`borrowed`, a note's citation credit), so credit never travels onward, neither along the
run nor from a note through the turn it cites to that turn's neighbours. Lending the
borrowed part too lifted whole runs of turns around one matching observation: on LoCoMo's
seven conversations, reading the own match instead raised Success@5 from 0.762 to 0.772 and
the forced packet's evidence coverage from 0.774 to 0.781.
`context_share` was chosen by leave-one-conversation-out on LoCoMo
(experiments/locomo_weights.py). The credit labels the record `structured_context`.
"""
from __future__ import annotations

from garden.derived.tables import groups_codec, table
from garden.models import Record, Story
from garden.rerank.context import Setting, QueryContext, StageBase, lend_matches

CONTEXT_SHARE = Setting("context_share", float, 0.75, "share of its best neighbour's own match a raw record receives",
                        ge=0, le=1)

RAW_KINDS = ("source", "chunk")


class Adjacent:
    """The rule above, folded record by record in the story's order (garden/derived/tables.py):
    two records next to each other once control records are set aside, raw, of one kind,
    with one date and one title, are each other's neighbours."""

    def __init__(self, story: Story):
        self.found: dict[str, list[str]] = {}
        self.last: Record | None = None

    def add(self, b: Record) -> None:
        if b.kind == "control":
            return
        a, self.last = self.last, b
        if (a is not None and a.kind in RAW_KINDS and a.kind == b.kind and a.title is not None
                and (a.at, a.title) == (b.at, b.title)):
            self.found.setdefault(a.id, []).append(b.id)
            self.found.setdefault(b.id, []).append(a.id)

    def value(self) -> dict[str, tuple[str, ...]]:
        return {rid: tuple(ids) for rid, ids in self.found.items()}


NEIGHBOURS = table("neighbours", Adjacent, groups_codec())


class Neighbours(StageBase, name="neighbours", settings=(CONTEXT_SHARE,), needs=("candidates",),
                 writes=("candidates",), labels=("structured_context",), supports=("structured_context",),
                 title="Neighbours: a record shares in its neighbour's score", tables=(NEIGHBOURS,),
                 drawn=("a raw record shares in its neighbour's score (the turns of one session, the chunks of one "
                        "document)")):
    def run(self, ctx: QueryContext) -> None:
        lend_matches(ctx, NEIGHBOURS, ctx.settings.context_share, "next to {by}, which matches the query")
