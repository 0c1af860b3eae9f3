"""The structure stage: a bonus for what the query resolved and the record carries.

A resolved topic adds `topic` (decayed one hop out along `related`), a resolved entity adds
`entity`; both label the item `structured_context`. Eligibility (scope, off-topic, time,
privacy) is the gate's, not this stage's: removing this stage removes the bonus only.
"""
from __future__ import annotations


from garden.rerank.context import QueryContext, StageBase


class Structure(StageBase, name="structure", uses=("topic", "entity", "related_decay")):
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
                c.score += settings.entity
                c.label("structured_context", res.entities[entity_hits[0]])
