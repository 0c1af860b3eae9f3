"""Packing into a budget (characters of item text), in lane order.

Curated memory first (states and decisions, best first), each superseded decision riding
immediately behind its selected successor; then evidence (sources, chunks, notes, views,
best first). Greedy: an item that does not fit is rejected `over_budget` and packing goes
on with the next. A predecessor whose successor is not packed is never admitted alone.
When the fill stage armed deep lanes, an evidence item that adds nothing the packet does
not already show is skipped `already_shown` (`adds_nothing`). When the restated stage armed
it, a raw record rides as the shorter note drawn from it (restated.py); when the passage
stage armed it, a long raw record rides as its passage that answers the query, and pays
for the passage's characters only (passage.py).
"""
from __future__ import annotations


from typing import Callable

from garden.rerank.candidates import Candidate
from garden.rerank.context import StageBase
from garden.rerank.passage import passage_of, rides_as_passage
from garden.rerank.provenance import follow_sources
from garden.rerank.restated import shorter_note, shown_through


def attach_predecessors(curated: list[Candidate]) -> list[Candidate]:
    """The curated lane in packing order: each item followed by its predecessors, and each
    predecessor by its own, newest first."""
    order: list[Candidate] = []

    def walk(c: Candidate) -> None:
        order.append(c)
        for p in c.predecessors:
            walk(p)

    for c in curated:
        walk(c)
    return order


def adds_nothing(c: Candidate, shown: set[str]) -> bool:
    """True for a record citing nothing that a packed item already cites (a turn behind
    the note that restates it: the note names it, and the budget is better spent on a turn
    the packet lacks). A derived record beside its packed source still rides, labelled a
    derived view: the reader is told what it restates."""
    return not c.record.sources and c.id in shown


def over_budget(size: int, left: int) -> str:
    """The detail of an `over_budget` rejection."""
    return f"{size} characters do not fit in the {left} left"


def pack(order: list[Candidate], budget: int, used: int = 0, shown: set[str] | None = None,
         restate: Callable[[Candidate, set[str]], Candidate | None] | None = None,
         cut: Callable[[Candidate], tuple[int, int] | None] | None = None,
         terms: dict[str, float] | None = None) -> tuple[list[Candidate], int]:
    """Greedy, in order. With `shown` (the ids packed or cited so far, which it updates), an
    item reached by no certain route that adds nothing to them is skipped `already_shown`:
    the budget goes to evidence the packet lacks. With `restate` (the item to pack in a
    candidate's place, given the ids packed so far, or None), that item rides instead and
    the candidate is shown through it. With `cut` (where in an item's text the passage to
    pack sits, or None to pack it whole), the item rides as that passage, for its
    characters; `terms` are the query's, named in its `why`."""
    packed: list[Candidate] = []
    packed_ids: set[str] = set()
    for c in order:
        if c.reason is not None or c.id in packed_ids:
            continue
        if c.successor is not None and c.successor.id not in packed_ids:
            c.reject("predecessor_without_successor",
                     f"its successor {c.successor.id} is not in the packet")
            continue
        if shown is not None and not c.certain and adds_nothing(c, shown):
            c.reject("already_shown", "everything it stands for is in the packet already")
            continue
        instead = restate(c, packed_ids) if restate is not None else None
        item = instead or c
        span = cut(item) if cut is not None else None
        size = len(item.record.body) if span is None else span[1] - span[0]
        if used + size > budget:
            for x in {item.id: item, c.id: c}.values():
                x.reject("over_budget", over_budget(size, budget - used)
                         + (f" (as {item.id}, the shorter note drawn from {c.id})" if instead else "")
                         + (" (as its passage)" if span is not None else ""))
            continue
        if instead is not None:
            shown_through(c, instead)
        if span is not None:
            rides_as_passage(item, span, terms or {})
        used += size
        packed.append(item)
        packed_ids.add(item.id)
        if shown is not None:
            shown.add(item.id)
            shown.update(item.record.sources)
    return packed, used


class Pack(StageBase, name="pack", essential=True, mode="selects", needs=("curated", "evidence"),
           reads=("fill", "follow_sources", "restate", "passage_terms"), writes=("packed", "used"),
           reasons=("over_budget", "already_shown", "predecessor_without_successor"),
           title="Pack: fitting the budget"):
    """The pack stage: the curated lane first, each predecessor right behind its successor,
    then the evidence lane (with the sources of packed items, when the provenance stage
    armed it), all within the budget."""

    def run(self, ctx) -> None:
        packed, used = pack(attach_predecessors(ctx.curated), ctx.spec.budget)
        evidence = ctx.evidence
        if ctx.follow_sources:
            evidence = follow_sources(ctx, packed, evidence)
        # with fill the evidence lane runs deep, so what restates the packet is skipped
        shown = {i for c in packed for i in (c.id, *c.record.sources)} if ctx.fill else None
        restate = (lambda c, packed_ids: shorter_note(ctx, c, packed_ids)) if ctx.restate else None
        cut = (lambda c: passage_of(ctx, c)) if ctx.passage_terms is not None else None
        more, used = pack(evidence, ctx.spec.budget, used, shown, restate, cut, ctx.passage_terms)
        ctx.packed, ctx.used = packed + more, used
