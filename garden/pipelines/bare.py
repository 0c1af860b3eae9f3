"""A bare pipeline: retrieve with one retriever, then pack in score order within the
budget, nothing else. The baseline every contrast is measured against.

With `hard_rules` it also obeys the rules no packet may break (`garden.rerank.eligibility`'s
hard reasons: a private record only when the query allows it, nothing that appears after
`as_of`, no control record, no state that is not current). The contrast matrix measures
the baseline without them (a baseline that leaks a private record is a contrast the
structure wins); `garden serve` serves every bare pipeline with them, since a packet that
leaves the server reaches a reader, not a matrix."""
from __future__ import annotations

import time

from garden.pipelines.indexes import PROCESS_INDEXES, IndexCache
from garden.models import Budget, Packet
from garden.pipelines.scoring import Outcome, scored
from garden.rerank.candidates import Candidate
from garden.rerank.eligibility import hard_reason
from garden.rerank.pack import over_budget
from garden.rerank.query import QuerySpec
from garden.rerank.sittings import SITTINGS_SHOWN, bare_sittings
from garden.retrievers import as_retriever, evidence_kind, member_scores, rank


class BarePipeline:
    """Retrieve with one retriever, then pack in score order within the budget."""

    uses: frozenset[str] = frozenset()  # no setting applies to a bare pipeline

    def __init__(self, retriever: str, indexes: IndexCache = PROCESS_INDEXES, hard_rules: bool = False):
        self.name = retriever
        self.indexes = indexes
        self.hard_rules = hard_rules

    def run(self, spec: QuerySpec) -> Outcome:
        t0 = time.perf_counter()
        retriever = as_retriever(self.indexes.retriever(spec.story, self.name))
        scores, members = scored(retriever, spec.query, self.name)
        members_of = retriever.members()
        t1 = time.perf_counter()
        ranked = [(rid, score) for rid, score in rank(scores) if score > 0]
        by_id = spec.story.by_id
        # greedy in score order, as pack.py; a bare ranking has nothing else to reject, and it
        # runs to every record sharing a word (hundreds a query), so what is not packed stays
        # an (id, score) pair until a trace asks for its scores
        sizes, budget, used, chosen, rejected = spec.story.sizes, spec.budget, 0, [], []
        servable = []   # what the hard rules let through: the sittings are ranked on these alone
        for rid, score in ranked:
            if self.hard_rules and (hard := hard_reason(by_id[rid], spec)) is not None:
                rejected.append({"id": rid, "reason": hard[0], "detail": hard[1]})
                continue
            servable.append((rid, score))
            size = sizes[rid]
            if used + size > budget:
                rejected.append({"id": rid, "reason": "over_budget", "detail": over_budget(size, budget - used)})
            else:
                used += size
                chosen.append((rid, score))
        packed = [Candidate(by_id[rid], scores_of, score)
                  for (rid, score), scores_of in zip(chosen, member_scores(members, [rid for rid, _ in chosen]))]
        for c in packed:
            # a retriever made of several (a fusion, a reranker over its base) says what each gave
            parts = f" ({', '.join(f'{m} {v:.4f}' for m, v in c.scores.items())})" if len(c.scores) > 1 else ""
            c.label(evidence_kind(c.scores, members_of), f"{self.name} score {c.score:.4f}{parts}")
        t2 = time.perf_counter()
        reason = f"bare {self.name}: always retrieves" + ("; the hard rules applied" if self.hard_rules else "")
        packet = Packet(decision="retrieve", reason=reason, warnings=[],
                        items=[c.item() for c in packed], rejected=rejected,
                        budget=Budget(limit=spec.budget, used=used),
                        sittings=bare_sittings(spec.story, servable, self.name, SITTINGS_SHOWN))

        def candidates() -> list[dict]:
            ids = [rid for rid, _ in ranked]
            return [{"id": rid, "scores": scores_of} for rid, scores_of in zip(ids, member_scores(members, ids))]

        return Outcome(packet, {}, {"retrieve": (t1 - t0) * 1e3, "pack": (t2 - t1) * 1e3},
                       deferred={"candidates": candidates})


