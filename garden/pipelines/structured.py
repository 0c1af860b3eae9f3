"""The structured pipeline: similarity broadens recall, structure restores the boundary.

It is a list of named stages (STAGES), each a small object with one method over a shared
query context (garden/rerank/context.py), run in order: `garden pipelines` lists them, and
the diagram of docs/pipeline.md draws each with what it does (`garden.rerank.stages.diagram`).

Scores: a candidate's rank score is its relevance (each lexical member's score as a
fraction of the query's saturation ceiling, plus the embedding cosine above a floor,
rescaled), plus a structure bonus (a resolved topic, decayed one hop out, and a resolved
entity), plus a phrase bonus. Checkpoints and fidelity never change a score: they are
notes. Every candidate, whatever stage brings it in, passes the one eligibility check.

Adding a stage is one module with a class of `name`, `uses`, `essential` and `run(ctx)`,
plus one line in STAGES. `default-NAME` (and `default-NAME-OTHER`) names the pipeline
without those stages, wherever a pipeline name goes.
"""
from __future__ import annotations

import time
from typing import Sequence

from garden._deadline import check_deadline, deadline
from garden.pipelines.indexes import PROCESS_INDEXES, IndexCache
from garden.models import Budget, Gate, Packet, SettingsBase
from garden.pipelines.scoring import Outcome
from garden.pipelines.store_reference import reference_of
from garden.pipelines.variants import with_settings
from garden.rerank.candidates import by_score
from garden.rerank.context import QueryContext, Stage
from garden.rerank.gather import gathered
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import Resolution, resolve
from garden.rerank.sittings import SITTINGS_SHOWN
from garden.rerank.stages import (PIPELINE_LABELS, PIPELINE_REASONS, STAGES, Settings,  # noqa: F401
                                  check_order, packet_stages, resolved, support_labels)
from garden.retrievers import as_retriever, evidence_kind

STRONG_LABELS = support_labels()  # declared by the stages that give them



def label_weak_support(cands, members) -> None:
    """`lexical_only` or `semantic_only` for a candidate nothing stronger supports."""
    for c in cands:
        if not STRONG_LABELS & set(c.labels):
            c.label(evidence_kind(c.scores, members))


class StructuredPipeline:
    def __init__(self, name: str = "default", retriever: str = "hybrid", without: frozenset[str] = frozenset(),
                 indexes: IndexCache = PROCESS_INDEXES, stages: Sequence[Stage] | None = None):
        """`stages`: the stage list (STAGES when None), less those named in `without`;
        refused in one line per problem when its order cannot run (`check_order`)."""
        self.name, self.retriever_name, self.indexes = name, retriever, indexes
        self.stages = [s for s in (STAGES if stages is None else stages) if s.name not in without]
        check_order(self.stages, name)
        # a setting is used by this pipeline when one of its stages reads it; resolution
        # (topics one hop out) reads related_decay before the stages run
        self.uses = frozenset(u for s in self.stages for u in s.uses)
        # the settings a variant's name gives (`default:standout=1.2`, variants.py): the
        # defaults its queries run with, beneath what a query or a case gives. The store's
        # reference is made without them, as it is for a query that gives them itself.
        self.settings: SettingsBase = Settings()

    def context(self, spec: QuerySpec, resolution: Resolution | None = None, reference: bool = True) -> QueryContext:
        """A fresh context for `spec`: its settings resolved, its topics and entities
        resolved against the story (or `resolution`, when the caller resolved them), the
        base retriever indexed, and the store's reference to hand when the calibration stage
        asks (none with `reference` False: the reference's own queries)."""
        settings = resolved(spec.settings)
        res = resolution or resolve(spec.story, spec.query, spec.hints, settings.related_decay)
        retriever = as_retriever(self.indexes.retriever(spec.story, self.retriever_name))
        ctx = QueryContext(spec=spec, settings=settings, resolution=res, retriever=retriever, rerun=self.run,
                           indexes=self.indexes)
        if reference:
            ctx.reference = lambda: self.reference(spec.story)
        return ctx

    def reference(self, story):
        """The store's reference for the decide stage (garden/pipelines/store_reference.py),
        made or read once: a derived file like an index, so a request's time limit does not
        stop it halfway (it is checked again between the request's own stages)."""
        retriever = as_retriever(self.indexes.retriever(story, self.retriever_name))
        with deadline(None):
            return reference_of(self, story, retriever.members().values())

    def run_stages(self, ctx: QueryContext, ranking: bool = False, after=None,
                   clock: float | None = None, until: str | None = None) -> dict[str, float]:
        """The one runner: each stage in order on `ctx`, timed (ms, each stage's own; the
        first also holds what ran since `clock`), `after(stage, ctx)` called after each,
        until a stage stops the query (ASK or SKIP: `ctx.stopped`) or the stage named
        `until` has run. A ranking (`ranking`) is the same run stopped before the first
        stage that selects a packet."""
        stop_at = packet_stages(self.stages) if ranking else frozenset()
        timings: dict[str, float] = {}
        clock = time.perf_counter() if clock is None else clock
        for stage in self.stages:
            if stage.name in stop_at:
                break
            check_deadline()
            stage.run(ctx)
            now = time.perf_counter()
            timings[stage.name] = round((now - clock) * 1e3, 3)
            clock = now
            if after is not None:
                after(stage, ctx)
            if ctx.stopped or stage.name == until:
                break
        return timings

    def run(self, spec: QuerySpec, after=None) -> Outcome:
        """The packet for `spec`, with its trace and each stage's time. `after(stage, ctx)`
        is called after each stage (the explorer records what each one left)."""
        clock = time.perf_counter()
        ctx = self.context(with_settings(spec, self.settings))
        res = ctx.resolution
        ctx.trace["stages"] = [s.name for s in self.stages]
        ctx.trace["resolution"] = {"topics": res.topics, "entities": res.entities,
                                   "projects": sorted(res.projects), "explicit_ids": res.explicit_ids}
        timings = self.run_stages(ctx, after=after, clock=clock)
        if ctx.stopped:
            decision, reason, fallback, question = ctx.stopped
            # the reason and the question to ask, as two sentences
            asked = f"{reason.rstrip('.')}. Question: {question}" if question else reason
            packet = Packet(decision=decision, reason=asked,
                            warnings=res.warnings, budget=Budget(limit=spec.budget, used=0), fallback=fallback)
            return Outcome(packet, ctx.trace, timings)
        return Outcome(self._packet(ctx), ctx.trace, timings, {"candidates": lambda: candidate_trace(ctx.candidates)})

    def ranking(self, spec: QuerySpec, depth: int, base=None):
        """The evidence for ranking a collection to `depth` rather than packing a packet:
        the stages run up to the first one that only selects a packet, and `ordered` on the
        result is the ranking (see garden/pipelines/ranking.py for the rule and for each way
        it departs from `run`). `base`: the base retriever's ranking, when already made."""
        from garden.pipelines.ranking import rank_query

        return rank_query(self, with_settings(spec, self.settings), depth, base)

    @staticmethod
    def _packet(ctx: QueryContext) -> Packet:
        """Every candidate not packed gets its one reason; the packet and the trace's list."""
        cands = ctx.candidates
        label_weak_support(cands.values(), ctx.retriever.members())
        packed_ids = {c.id for c in ctx.packed}
        for c in cands.values():
            if c.id in packed_ids or c.reason is not None:
                continue
            if c.successor is not None:
                c.reject("predecessor_without_successor", f"its successor {c.successor.id} is not in the packet")
            else:
                c.reject("rank_cut", "not selected in its lane")
        verdict = ctx.verdict
        gate = None if verdict is None else Gate(
            support=verdict.support, level=verdict.level, threshold=verdict.threshold, answers=verdict.answers,
            reference=verdict.standing is not None, **(verdict.standing or {}))
        return Packet(decision="retrieve", reason=ctx.reason, warnings=ctx.resolution.warnings,
                      items=[c.item() for c in ctx.packed], gate=gate,
                      # dicts, validated by the packet in one pass: hundreds a query
                      rejected=[{"id": c.id, "reason": c.reason, "detail": c.detail}
                                for c in sorted(cands.values(), key=lambda c: c.id) if c.id not in packed_ids],
                      budget=Budget(limit=ctx.spec.budget, used=ctx.used), fallback=ctx.fallback,
                      # a silent packet lists no sitting either: what the gate withholds is withheld whole
                      sittings=ctx.sittings[:SITTINGS_SHOWN] if ctx.packed else [],
                      gathered=gathered(ctx.spec.story, ctx.packed) if ctx.shape is not None and ctx.shape.gathering
                      else None)


def candidate_trace(cands: dict) -> list[dict]:
    """The trace's list of every candidate, best first: its scores, lane and door. Hundreds
    a query on a conversation (every turn of a person the question names), so it is made
    only when read (`Outcome.deferred`)."""
    return [{"id": c.id, "scores": {k: round(v, 6) for k, v in c.scores.items()}, "score": round(c.score, 6),
             "lane": c.lane, "door": c.door} for c in by_score(list(cands.values()))]
