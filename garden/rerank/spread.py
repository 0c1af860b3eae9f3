"""The spread stage: a list gathered across sittings, not ten messages of one.

"What are Ida's favourite films?" gathers what was said over weeks: one film one evening,
another a month later. A sitting that matches well (one long talk about films) fills the
top of a ranking with its messages, and ten messages of one sitting cover less than the
best of several. Each live raw record (`source` or `chunk`) with a title is ranked within
its sitting (one date and title, as the neighbours stage reads a sitting) by its score;
the record with n better ones in its sitting keeps

    score / (1 + sitting_spread * n)

so a sitting's best record is untouched and its followers give way, more the further down
they are, to the best of other sittings (a cut of the same kind as maximal marginal
relevance, Carbonell and Goldstein 1998, with the sitting as the measure of redundancy).
Ties are broken by id. `sitting_spread` is chosen by the folds over the four kinds of chat
(experiments/chat_kinds.py, docs/chats.md).
"""
from __future__ import annotations

from garden.rerank.context import QueryContext, Setting, StageBase

SITTING_SPREAD = Setting("sitting_spread", float, 0.0,
                         "how much a record gives way for each better record of its own sitting", ge=0, le=10)
RAW_KINDS = ("source", "chunk")


class Spread(StageBase, name="spread", settings=(SITTING_SPREAD,), needs=("candidates",), writes=("candidates",),
             title="Spread: a sitting's followers give way to other sittings' best",
             drawn="a sitting's followers give way to other sittings' best (off: docs/chats.md)"):

    def run(self, ctx: QueryContext) -> None:
        spread = ctx.settings.sitting_spread
        if spread <= 0:
            return
        seen: dict[tuple, int] = {}
        live = [c for c in ctx.candidates.values() if c.reason is None and c.score > 0
                and c.record.kind in RAW_KINDS and c.record.title is not None]
        for c in sorted(live, key=lambda c: (-c.score, c.id)):
            sitting = (c.record.at, c.record.title)
            better = seen.get(sitting, 0)
            seen[sitting] = better + 1
            if better:
                c.score /= 1 + spread * better
