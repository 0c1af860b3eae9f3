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
                 title="Provenance: sources follow what cites them",
                 drawn="sources of packed items follow them",
                 shown_with="pack", armed="sources of packed items follow them into the evidence lane."):
    """Arms its packing rule: which items are packed is known only once the curated lane is
    packed, so the pack stage calls the rule then."""

    def run(self, ctx: QueryContext) -> None:
        ctx.pack_rules.append(FOLLOW_SOURCES)


def follow_sources(ctx: QueryContext, packed: list[Candidate], evidence: list[Candidate]) -> list[Candidate]:
    """The evidence lane with the sources each packed item names, each source placed before
    the first item of the lane that ranks below it (best first, ties by id): the lane keeps
    the order a rule before this one gave it (gather.py packs each sitting's best first)."""
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
    given = {c.id for c in evidence}
    return merged(evidence, by_score([c for c in chosen.values() if c.id not in given]))


def merged(lane: list[Candidate], more: list[Candidate]) -> list[Candidate]:
    """`more` (best first) placed into `lane`, whose order is kept: each before the first
    item of the lane it outranks. On a lane ranked best first, the ranking of both."""
    out, i = [], 0
    for c in lane:
        while i < len(more) and (-more[i].score, more[i].id) < (-c.score, c.id):
            out.append(more[i])
            i += 1
        out.append(c)
    return out + more[i:]


FOLLOW_SOURCES = FollowSources()
