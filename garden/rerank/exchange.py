"""The exchange stage: a message shares in the match of the exchange it belongs to.

People type a thought as several messages in a row (a burst), and answer a question in the
burst after it, rarely repeating its words ("How was the trip to Varnholm?" / "Amazing." /
"We hiked to the glacier on day two"). The neighbours stage lends a record's match to the
records next to it; in a chat of short messages the one that holds the answer is often two
or three messages from the one that matches, past its reach. A message's exchange is read
from the chat alone, in the story's order: the raw records (`source`) of one sitting (one
date and title, as the neighbours stage reads a sitting) said by one speaker in a row are
a burst; a message's exchange is its own burst and, when the other speaker's burst just
before it asked a question (its last message holds a "?"), that burst: what it replies to.
A burst that asked nothing lends nothing to the next (lending every burst to its reply cost
LoCoMo's raw chat logs nDCG@10, docs/chats.md). Each message then receives

    exchange_share * (the best own match among the rest of its exchange)

from the query's `candidates` best live records (`lenders`), through the eligibility check
by the `neighbour` door, labelled `structured_context`. As in the neighbours stage a
record lends its own match only (`score - borrowed`), so credit never travels on, and the
store's own voice, unasked (addressee.py), neither lends nor borrows. A record without a
speaker or a title has no exchange. `exchange_share` is chosen by the folds over the four
kinds of chat (experiments/chat_kinds.py, docs/chats.md).
"""
from __future__ import annotations

from garden.derived.tables import groups_codec, table
from garden.models import Record, Story
from garden.rerank.context import QueryContext, Setting, StageBase, lend_matches

EXCHANGE_SHARE = Setting("exchange_share", float, 0.0,
                         "share of the best own match in its exchange (its burst and the burst it replies to) a "
                         "message receives", ge=0, le=1)


class Bursts:
    """The rule above, folded record by record in the story's order (garden/derived/tables.py):
    record id -> the records that share in its match (the rest of its burst, and the burst
    that replies to it)."""

    def __init__(self, story: Story):
        self.found: dict[str, list[str]] = {}
        self.sitting: tuple | None = None
        self.burst: list[Record] = []       # the burst being read
        self.before: list[Record] = []      # the other speaker's burst just before it

    def add(self, r: Record) -> None:
        if r.kind == "control":
            return
        if r.kind != "source" or r.title is None or r.speaker is None:
            self._close()
            self.sitting, self.burst, self.before = None, [], []
            return
        sitting = (r.at, r.title)
        if sitting != self.sitting:
            self._close()
            self.sitting, self.burst, self.before = sitting, [], []
        elif self.burst and self.burst[-1].speaker != r.speaker:
            self._close()
            self.before, self.burst = self.burst, []
        self.burst.append(r)

    def _close(self) -> None:
        """The burst just read borrows from itself and, when that burst asked a question
        (its last message holds a "?"), from the burst it replies to."""
        asked = self.before if self.before and "?" in self.before[-1].text else []
        for lender in asked + self.burst:
            for m in self.burst:
                if m.id != lender.id:
                    self.found.setdefault(lender.id, []).append(m.id)

    def value(self) -> dict[str, tuple[str, ...]]:
        self._close()
        self.burst, self.before = [], []
        return {rid: tuple(ids) for rid, ids in self.found.items()}


EXCHANGES = table("exchanges", Bursts, groups_codec())


def exchanges(story: Story) -> dict[str, tuple[str, ...]]:
    """Record id -> the records that share in its match: those whose exchange holds it (see
    the module docstring); remembered on the story and saved (garden/derived/tables.py)."""
    return EXCHANGES.of(story)


class Exchange(StageBase, name="exchange", settings=(EXCHANGE_SHARE,), needs=("candidates",),
               writes=("candidates",), labels=("structured_context",), supports=("structured_context",),
               title="Exchange: a message shares in its burst's and the question's match", tables=(EXCHANGES,),
               drawn=("a message shares in its burst's match and in the question's it replies to "
                      "(off: docs/chats.md)")):
    def run(self, ctx: QueryContext) -> None:
        lend_matches(ctx, EXCHANGES, ctx.settings.exchange_share, "in one exchange with {by}, which matches the query")
