"""A bare pipeline: retrieve with one retriever, then pack in score order within the
budget, nothing else. The baseline every contrast is measured against."""
from __future__ import annotations

import time

from garden.derived.indexes import PROCESS_INDEXES, IndexCache
from garden.models import Budget, Packet
from garden.pipelines.scoring import Outcome, scored
from garden.rerank.candidates import Candidate
from garden.rerank.pack import pack
from garden.rerank.query import QuerySpec
from garden.retrievers import as_retriever, column, evidence_kind, rank


class BarePipeline:
    """Retrieve with one retriever, then pack in score order within the budget."""

    uses: frozenset[str] = frozenset()  # no setting applies to a bare pipeline

    def __init__(self, retriever: str, indexes: IndexCache = PROCESS_INDEXES):
        self.name = retriever
        self.indexes = indexes

    def run(self, spec: QuerySpec) -> Outcome:
        t0 = time.perf_counter()
        retriever = as_retriever(self.indexes.retriever(spec.story, self.name))
        scores, members = scored(retriever, spec.query, self.name)
        members_of = retriever.members()
        t1 = time.perf_counter()
        ranked = [(rid, score) for rid, score in rank(scores) if score > 0]
        ids = [rid for rid, _ in ranked]
        # each member's scores of the ranked records read off at once (hundreds a query)
        columns = {name: column(values, ids) for name, values in members.items()}
        by_id = spec.story.by_id
        cands = [Candidate(by_id[rid], {name: values[n] for name, values in columns.items()}, score)
                 for n, (rid, score) in enumerate(ranked)]
        packed, used = pack(cands, spec.budget)
        for c in packed:   # labels show on packed items only: the rest are not labelled (hundreds a query)
            c.label(evidence_kind(c.scores, members_of), f"{self.name} score {c.score:.4f}")
        t2 = time.perf_counter()
        packet = Packet(decision="retrieve", reason=f"bare {self.name}: always retrieves", warnings=[],
                        items=[c.item() for c in packed],
                        rejected=[{"id": c.id, "reason": c.reason, "detail": c.detail} for c in cands if c.reason],
                        budget=Budget(limit=spec.budget, used=used))
        stages = {"candidates": [{"id": c.id, "scores": c.scores} for c in cands]}
        return Outcome(packet, stages, {"retrieve": (t1 - t0) * 1e3, "pack": (t2 - t1) * 1e3})


