"""The structure stage: a bonus for what the query resolved and the record carries.

A resolved topic adds `topic` (decayed one hop out along `related`), a resolved entity adds
`entity` times the entity's selectivity in the store, log(N / n) / log(N) for an entity
that n of the store's N records carry (1 for an entity on one record, 0 for one on every
record): an inverse document frequency (Sparck Jones 1972) for entities. A person whom
half of a conversation's notes are about says little about which of its turns a question wants, and
an unscaled bonus let every note about them outrank the turn that answers (LoCoMo, 1,426
questions: Success@5 0.701 unscaled against 0.762 scaled; docs/figures.md, "LoCoMo"). Both label the item
`structured_context`. Eligibility (scope, off-topic, time,
privacy) is the eligibility rules', not this stage's: removing this stage removes the bonus only.
"""
from __future__ import annotations


import math

from garden.derived.tables import numbers_codec, table
from garden.models import Record, Story
from garden.rerank.context import Setting, QueryContext, StageBase
from garden.rerank import addressee, window

TOPIC = Setting("topic", float, 0.6, "bonus for a resolved topic", ge=0)
ENTITY = Setting("entity", float, 0.6, "bonus for a resolved entity", ge=0)
# resolution reads it before the stages run (the pipeline always uses it)
RELATED_DECAY = Setting("related_decay", float, 0.5, "a related topic counts this much, one hop out", ge=0, le=1)
WINDOW = Setting("window", float, 0.5, "a record in the time the query names counts this much more (window.py)",
                 ge=0)
ADDRESSED = Setting("addressed", float, 0.5, "a turn the addressee said counts this much more when the question "
                    "asks what it said (addressee.py)", ge=0)
UNASKED = Setting("unasked", float, 0.4, "what the addressee said counts this much when the question does not ask "
                  "for it (addressee.py)", ge=0, le=1)


class Selectivity:
    """Each entity's selectivity (the module docstring), folded record by record
    (garden/derived/tables.py): the records that are not control records, and how many
    carry each entity."""

    def __init__(self, story: Story):
        self.total = 0
        self.counts: dict[str, int] = {}

    def add(self, r: Record) -> None:
        if r.kind == "control":
            return
        self.total += 1
        for e in dict.fromkeys(r.entities):
            self.counts[e] = self.counts.get(e, 0) + 1

    def value(self) -> dict[str, float]:
        total = self.total
        return {e: (math.log(total / n) / math.log(total) if total > 1 else 1.0) for e, n in self.counts.items()}


ENTITY_SELECTIVITY = table("entity_selectivity", Selectivity, numbers_codec("f"))


def entity_selectivity(story: Story) -> dict[str, float]:
    """Entity id -> log(N / n) / log(N), N the story's records that are not control
    records, n those carrying the entity; remembered on the story (it never changes) and
    saved (garden/derived/tables.py)."""
    return ENTITY_SELECTIVITY.of(story)


class Structure(StageBase, name="structure", settings=(TOPIC, ENTITY, RELATED_DECAY, WINDOW, ADDRESSED, UNASKED),
                mode="moves", needs=("candidates",), reads=("window", "addressee", "addressed_by", "unasked"),
                labels=("structured_context",), supports=("structured_context",),
                title="Structure: resolved topics and people", tables=(ENTITY_SELECTIVITY,),
                drawn=("bonus for a resolved topic (one hop out) or entity, the entity's by its selectivity in the "
                       "store; times 1 + window for what is dated in the named time, times 1 + addressed for what the"
                       " addressee said, times unasked for it when the question asks about the user")):
    def run(self, ctx: QueryContext) -> None:
        res, settings = ctx.resolution, ctx.settings
        for c in ctx.candidates.values():
            if c.reason is not None:
                continue
            r = c.record
            topic_hits = {t: res.topics[t] for t in r.topics if t in res.topics}
            entity_hits = [e for e in r.entities if e in res.entities]
            if topic_hits:
                best = max(topic_hits, key=lambda t: (topic_hits[t], t))
                c.score += settings.topic * topic_hits[best]
                c.label("structured_context", res.topic_why[best])
            if entity_hits:
                selectivity = entity_selectivity(ctx.spec.story)
                best = max(entity_hits, key=lambda e: (selectivity.get(e, 1.0), e))
                c.score += settings.entity * selectivity.get(best, 1.0)
                c.label("structured_context", res.entities[best])
        # what the query resolved beyond topics and entities multiplies what the bonuses left
        window.lift(ctx, ctx.candidates.values())      # a time it names (window.py)
        addressee.lift(ctx, ctx.candidates.values())   # whose words it asks for (addressee.py)
