"""Packing into a budget (characters of item text), in lane order.

Curated memory first (states and decisions, best first), each superseded decision riding
immediately behind its selected successor; then evidence (sources, chunks, notes, views,
best first). Greedy: an item that does not fit is rejected `over_budget` and packing goes
on with the next. A predecessor whose successor is not packed is never admitted alone.

What else changes the packing is a stage's own rule, armed in the query's context
(`PackRule`, garden/rerank/context.py) and called here without naming it: the provenance
stage widens the evidence lane with the sources of packed items (provenance.py), the fill
stage skips an evidence item that adds nothing the packet shows (`already_shown`, fill.py),
the restated stage packs a raw record's shorter note in its place (restated.py), the passage
stage packs a long raw record as its passage that answers the query (passage.py).
"""
from __future__ import annotations

from typing import Sequence

from garden.rerank.candidates import Candidate
from garden.rerank.context import PackRule, QueryContext, StageBase


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


def _first(rules: Sequence[PackRule], ask) -> tuple[PackRule | None, object]:
    """The first rule whose answer to `ask` is not None, with that answer."""
    for rule in rules:
        found = ask(rule)
        if found is not None:
            return rule, found
    return None, None


def pack(order: list[Candidate], budget: int, used: int = 0, shown: set[str] | None = None,
         rules: Sequence[PackRule] = (), ctx: QueryContext | None = None) -> tuple[list[Candidate], int]:
    """Greedy, in order. With `shown` (the ids packed or cited so far, which it updates), an
    item reached by no certain route that adds nothing to them is skipped `already_shown`:
    the budget goes to evidence the packet lacks. With `rules` (the packing rules the stages
    armed, asked with the query's context `ctx`), the first rule that gives an item to pack
    in a candidate's place has it ride instead, and the first that gives a part of the
    item's text has the item ride as that part, for its characters."""
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
        by, instead = _first(rules, lambda rule: rule.instead(ctx, c, packed_ids))
        item = instead or c
        cutter, span = _first(rules, lambda rule: rule.cut(ctx, item))
        size = len(item.record.body) if span is None else span[1] - span[0]
        if used + size > budget:
            noted = "".join(rule.noted(c, item, span) for rule in (by, cutter) if rule is not None)
            for x in {item.id: item, c.id: c}.values():
                x.reject("over_budget", over_budget(size, budget - used) + noted)
            continue
        if by is not None:
            by.shown_through(c, instead)
        if cutter is not None:
            cutter.rides(item, span)
        used += size
        packed.append(item)
        packed_ids.add(item.id)
        if shown is not None:
            shown.add(item.id)
            shown.update(item.record.sources)
    return packed, used


class Pack(StageBase, name="pack", essential=True, mode="selects", needs=("curated", "evidence"),
           reads=("pack_rules",), writes=("packed", "used"),
           reasons=("over_budget", "already_shown", "predecessor_without_successor"),
           title="Pack: fitting the budget",
           drawn="budgeted packet, curated lane first",
           step="budget"):
    """The pack stage: the curated lane first, each predecessor right behind its successor,
    then the evidence lane, all within the budget, under the packing rules the stages
    before it armed (`ctx.pack_rules`)."""

    def run(self, ctx: QueryContext) -> None:
        packed, used = pack(attach_predecessors(ctx.curated), ctx.spec.budget)
        rules = ctx.pack_rules
        evidence = ctx.evidence
        for rule in rules:
            evidence = rule.widen(ctx, packed, evidence)
        # a rule that runs the evidence lane deep has what restates the packet skipped
        shown = {i for c in packed for i in (c.id, *c.record.sources)} if any(r.skips_shown for r in rules) else None
        more, used = pack(evidence, ctx.spec.budget, used, shown, rules, ctx)
        ctx.packed, ctx.used = packed + more, used
