"""The supersession stage: a superseded decision rides only right behind its successor.

A successor that is itself superseded rides behind its own, so a chain packs newest first
(wood, propane, kerosene); the chain's head ranks with the best score in it. A successor
the query did not retrieve enters here, through the eligibility check like every candidate; a
predecessor whose successor cannot be served is rejected `predecessor_without_successor`.
"""
from __future__ import annotations


from garden.rerank.candidates import Candidate
from garden.rerank.context import QueryContext, StageBase
from garden.rerank.timeline import superseded_as_of


def chain(head: Candidate) -> list[Candidate]:
    """Every predecessor riding behind `head`, newest first."""
    out: list[Candidate] = []
    for p in head.predecessors:
        out.append(p)
        out.extend(chain(p))
    return out


class Supersession(StageBase, name="supersession", needs=("candidates",), writes=("candidates",),
                   labels=("conflicting_or_superseded", "structured_context"), supports=("structured_context",),
                   reasons=("predecessor_without_successor",),
                   title="Supersession: history rides behind its successor",
                   drawn="a superseded decision rides behind its successor"):
    def run(self, ctx: QueryContext) -> None:
        story, as_of, cands = ctx.spec.story, ctx.spec.as_of, ctx.candidates
        queue = sorted((c for c in cands.values() if c.reason is None and c.record.kind == "decision"),
                       key=lambda c: c.id)
        seen: set[str] = set()
        while queue:
            c = queue.pop(0)
            if c.id in seen or c.reason is not None:
                continue
            seen.add(c.id)
            successor_id = superseded_as_of(c.record, story, as_of)
            if successor_id is None:
                continue
            succ = cands.get(successor_id)
            if succ is None:
                succ = ctx.admit(story.by_id[successor_id], "supersession")
                succ.label("structured_context", f"successor of {c.id} (its superseded_by field)")
                queue.append(succ)
            c.label("conflicting_or_superseded", f"superseded by {successor_id}: history, not current advice")
            c.successor = succ
            if succ.reason is not None:
                c.reject("predecessor_without_successor", f"its successor {successor_id} is not selectable "
                                                          f"({succ.reason})")
                continue
            succ.predecessors.append(c)
        for c in cands.values():  # the head of each chain ranks with the best score in it
            if c.successor is None and c.predecessors:
                c.score = max([c.score] + [p.score for p in chain(c)])
