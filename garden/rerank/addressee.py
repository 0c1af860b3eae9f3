"""The addressee stage: a question about what the store's own voice said.

In an assistant's memory the question's "you" is the assistant: "What glaze did you suggest
for the mugs?" asks for the assistant's turn, not the user's turn that asked about mugs,
though the user's holds as many of the question's words. A story names that voice in its
`addressee` field (an entity id; `garden import longmemeval` sets it to the assistant). A
story without one (LoCoMo's conversations, asked about in the third person) is untouched.

A question asks what the addressee said when it holds second-person reported speech
(`addressed_speech`): "you" followed, within two words, by a verb of saying or advising
(said, told, suggested, recommended, mentioned, advised, gave, listed, explained, ...), or
"your" followed by a noun of it (suggestion, advice, recommendation, answer, list, ...).
"Can you remind me...", "Do you know..." ask the addressee to do something now, not what
it said, and name no verb of the list.

The stage runs before retrieval and notes the addressee on the query's context; the
structure stage multiplies the score of each live candidate the addressee said (its
`speaker`) by 1 + `addressed` and labels it `structured_context`: who said a record is
structure the query resolved, like a topic or an entity. Like the window (window.py) it
reorders among what the query's words found and brings in nothing of its own.

The other side of the same rule: a question that does not ask what the addressee said asks
about the person whose memory the store is. An assistant's long answers hold a question's
words by the dozen (it restates the user's topic and elaborates on it), and would outrank
the user's own short statement of the fact; so, unasked, what the addressee said counts
`unasked` (0.4) of its score, and the user's own words lead; it neither lends its match
to the turns beside it nor borrows theirs (neighbours.py). Chosen by the protocol of
experiments/chat_protocol.py on both development benchmarks: held out, LongMemEval's turn
nDCG@10 rose from 0.603 to 0.679 with the sessions stage beside it (docs/longmemeval.md);
LoCoMo's stories name no addressee, so nothing there moves.
"""
from __future__ import annotations

import re

from garden.rerank.context import QueryContext, StageBase

SAYING = ("said", "say", "told", "tell", "suggested", "suggest", "recommended", "recommend", "mentioned",
          "mention", "advised", "advise", "gave", "give", "listed", "list", "explained", "explain",
          "described", "describe", "proposed", "propose", "shared", "provided", "provide", "wrote", "write",
          "came up with", "answered", "replied", "warned", "reminded", "named", "offered")
SAID_THINGS = ("suggestion", "suggestions", "advice", "recommendation", "recommendations", "answer", "answers",
               "list", "explanation", "idea", "ideas", "tip", "tips", "reply", "response", "words")
_WORDS = r"(?:\s+[\w'-]+){0,2}?"
_YOU_SAID = re.compile(rf"\byou{_WORDS}\s+(?:{'|'.join(re.escape(w) for w in SAYING)})\b", re.IGNORECASE)
_YOUR_THING = re.compile(rf"\byour\s+(?:[\w'-]+\s+)?(?:{'|'.join(SAID_THINGS)})\b", re.IGNORECASE)


def addressed_speech(query: str) -> str | None:
    """The words of `query` that ask what the addressee said, or None (see the module
    docstring)."""
    m = _YOU_SAID.search(query) or _YOUR_THING.search(query)
    return m.group(0) if m else None


def lift(ctx: QueryContext, candidates) -> list[str]:
    """Multiply each live candidate the addressee said by 1 + `addressed` when the query asks
    what it said, else by `unasked`; the ids lifted (none when lowered)."""
    addressee = ctx.addressee
    if addressee is None:
        if ctx.unasked is not None and ctx.settings.unasked < 1:
            lowered = [c for c in candidates if c.reason is None and c.score > 0 and c.record.speaker == ctx.unasked]
            for c in lowered:
                c.score *= ctx.settings.unasked
                c.prior *= ctx.settings.unasked   # an order among what matched: the decision reads the match
                c.why.append(f"said by {ctx.unasked}; the question asks about the user, not what {ctx.unasked} "
                             f"said (x{ctx.settings.unasked:g})")
            if lowered:
                ctx.trace.setdefault("addressee", {})["lowered"] = len(lowered)
        return []
    lifted = []
    for c in candidates:
        if c.reason is None and c.score > 0 and c.record.speaker == addressee:
            c.score *= 1 + ctx.settings.addressed
            c.label("structured_context", f"said by {addressee}, whom the question asks ('{ctx.addressed_by}')")
            lifted.append(c.id)
    ctx.trace.setdefault("addressee", {})["lifted"] = sorted(lifted)
    return lifted


class Addressee(StageBase, name="addressee", mode="arms", writes=("addressee", "addressed_by", "unasked"),
                title="Addressee: whose words the query asks for",
                drawn=("a question about what the store's own voice said (\"what did you suggest?\"), in a story "
                       "naming it")):
    def run(self, ctx: QueryContext) -> None:
        addressee = ctx.spec.story.addressee
        if addressee is None:
            return
        words = addressed_speech(ctx.spec.query)
        if words is None:
            ctx.unasked = addressee
            return
        ctx.addressee, ctx.addressed_by = addressee, words
        ctx.trace["addressee"] = {"entity": addressee, "said": words}
