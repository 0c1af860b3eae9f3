"""The provenance stage: the sources a packed item names follow it into the evidence lane.

A source enters through the eligibility check on a certain route (the link is explicit), so scope and
off-topic do not stop it, but visibility, privacy and the control plane always do: a
control record named in a decision's `sources` is rejected `control_plane`, never packed.
A rejection a certain route lifts (scope, off-topic, the lanes' ranking, an earlier
delivery) is lifted; one it cannot (the hard rules) stands.
"""
from __future__ import annotations


from garden.rerank.candidates import Candidate, by_score
from garden.rerank.context import PackRule, QueryContext, StageBase

from garden.rerank.eligibility import HARD_REASONS


class FollowSources(PackRule):
    """The provenance stage's packing rule: the evidence lane takes the sources each packed
    item names (`follow_sources`), once the curated lane is packed."""

    def widen(self, ctx: QueryContext, packed: list[Candidate], evidence: list[Candidate]) -> list[Candidate]:
        return follow_sources(ctx, packed, evidence)


class Provenance(StageBase, name="provenance", mode="selects", writes=("pack_rules",),
                 labels=("provenance_supported",), supports=("provenance_supported",),
                 title="Provenance: sources follow what cites them"):
    """Arms its packing rule: which items are packed is known only once the curated lane is
    packed, so the pack stage calls the rule then."""

    def run(self, ctx: QueryContext) -> None:
        ctx.pack_rules.append(FOLLOW_SOURCES)


def follow_sources(ctx: QueryContext, packed: list[Candidate], evidence: list[Candidate]) -> list[Candidate]:
    """The evidence lane with the sources each packed item names, best first."""
    chosen = {c.id: c for c in evidence}
    story = ctx.spec.story
    for item in packed:
        for sid in item.record.sources:
            src = ctx.candidates.get(sid)
            if src is not None and src.reason is not None and src.reason not in HARD_REASONS:
                src.reason, src.detail = None, None
            src = ctx.admit(story.by_id[sid], "provenance", certain=True)
            if src.reason is not None:
                continue
            src.labels = [x for x in src.labels if x not in ("lexical_only", "semantic_only")]
            src.label("provenance_supported", f"source of {item.id}")
            chosen[sid] = src
    return by_score(list(chosen.values()))


FOLLOW_SOURCES = FollowSources()
