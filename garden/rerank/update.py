"""The update stage: asked about the present, the newest statement of a fact leads.

"How much is my studio rent now?" in a memory that holds "the rent is 310" from March and
"the rent goes up to 340" from later: both match the question about as well, and a
retriever prefers whichever is worded closer, often the older. A curated store says which
record replaced which (`superseded_by`, the supersession stage); raw statements in a chat
say nothing of the kind, so this stage reads it from when they were said.

It applies when the query asks about the present (`asks_now`: "now", "currently",
"current", "these days", "at the moment", "nowadays", "still", "anymore", "latest", "most
recent"). Among the live `source` records one speaker said, dated, that the query's own
words found (not a neighbour or a citation lending its credit; not a question, which states
no fact), that match the query
nearly as well as that speaker's best (a score at least `update_share` of it: statements
of the same fact, as far as the question can tell), the newest leads: it takes the group's
best score, and each older one keeps its own score and is labelled
`conflicting_or_superseded` ("an earlier statement: history"), so it rides behind the
newest as the draft's superseded decisions ride behind theirs, never in its place. A
group of one, or one whose newest already leads, only gains the labels. Nothing is
rejected and nothing enters: the stage reorders what the query's words found.
"""
from __future__ import annotations

import re
from collections import defaultdict

from garden.rerank.context import QueryContext, StageBase

NOW_WORDS = ("now", "currently", "current", "these days", "at the moment", "nowadays", "still", "anymore",
             "any more", "latest", "most recent", "most recently")
_NOW = re.compile(r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in NOW_WORDS) + r")\b",
                  re.IGNORECASE)
UPDATE_SHARE = 0.8     # a match at least this share of the speaker's best is the same fact, as far as the query tells


def asks_now(query: str) -> str | None:
    """The word of `query` that asks about the present, or None."""
    m = _NOW.search(query)
    return m.group(0) if m else None


class Update(StageBase, name="update", needs=("candidates",),
             labels=("conflicting_or_superseded", "structured_context"), supports=("structured_context",),
             title="Update: the newest of one speaker's statements leads",
             drawn=("asked about the present (\"now\", \"currently\"), the newest of one speaker's matching "
                    "statements leads, the older ride behind it as history")):
    def run(self, ctx: QueryContext) -> None:
        now = asks_now(ctx.spec.query)
        if now is None:
            return
        by_speaker = defaultdict(list)
        for c in ctx.candidates.values():
            r = c.record
            # what the query's own words found (the retriever's or the phrase's door), not
            # what rides in on a neighbour's or a citation's credit
            # a question states no fact: "Which glaze would you suggest?" is not an earlier rent
            if (c.reason is None and c.score > 0 and c.door in ("retriever", "phrase") and r.kind == "source"
                    and r.speaker and r.at is not None and not r.text.rstrip().endswith("?")):
                by_speaker[r.speaker].append(c)
        led = []
        for speaker in sorted(by_speaker):
            cands = by_speaker[speaker]
            best = max(c.score for c in cands)
            group = [c for c in cands if c.score >= UPDATE_SHARE * best]
            if len(group) < 2:
                continue
            newest = max(group, key=lambda c: (c.record.at, c.id))
            older = [c for c in group if c.record.at < newest.record.at]
            if not older:
                continue
            newest.score = best + 1e-6     # first among equals: it leads the older statements
            newest.label("structured_context", f"the newest of {len(older) + 1} statements by {speaker} that "
                                               f"match the query alike, asked about '{now}'")
            for c in older:
                c.label("conflicting_or_superseded", f"an earlier statement by {speaker} ({c.record.at}) than "
                                                     f"{newest.id} ({newest.record.at}): history, not the current fact")
            led.append({"newest": newest.id, "older": sorted(c.id for c in older)})
        ctx.trace["update"] = {"asks": now, "led": led}
