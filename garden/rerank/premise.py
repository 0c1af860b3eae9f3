"""The premise stage: a packet whose best evidence is someone else's says so.

A question that names one person ("When did Melanie go to the support group?") assumes
the thing is theirs. When the store's best evidence is about another person (a note
about someone else only), the premise may be wrong: the other person did it, or nobody
said it (LoCoMo's adversarial questions are built this way). The item is labelled
`premise_mismatch` and the packet carries a warning naming both people, so a reader (or
an agent) can answer "that was Caroline, not Melanie" instead of repeating the wrong
premise. Nothing is dropped and no score changes: the
evidence is still the best the store holds, and a question that names the wrong person
by a slip deserves its answer. The stage acts only when the query names exactly one
person who speaks somewhere in the story.

The test: with the named person's names blanked out of the query, the best lexical
relevance any record about another person alone has, over the best a record about the
named person alone has, is at least `premise_ratio`. Every record
of the store counts, whatever the eligibility rules would say of it (a note about the other person is
`off_topic` for this question, and is exactly the evidence that matters). The first
packed item about the other person, or said by them, is labelled; the warning names the
evidence either way.
`premise_ratio` was chosen by leave-one-conversation-out on LoCoMo
(experiments/locomo_premise.py).
"""
from __future__ import annotations

import re

from garden.analyzer import without_function_words
from garden.derived.tables import strings_codec, table
from garden.models import Record, Story
from garden.rerank.context import Setting, QueryContext, StageBase
from garden.retrievers import is_semantic, relevance

PREMISE_RATIO = Setting("premise_ratio", float, 1.6, "another person's best evidence this many times the named "
                        "one's: a premise warning", ge=1)

LABEL = "premise_mismatch"
WARNING = "premise:"  # how the packet's warning begins


class Speakers:
    """The entities that speak somewhere in the story, folded record by record
    (garden/derived/tables.py)."""

    def __init__(self, story: Story):
        self.found: set[str] = set()

    def add(self, r: Record) -> None:
        if r.speaker:
            self.found.add(r.speaker)

    def value(self) -> frozenset[str]:
        return frozenset(self.found)


SPEAKERS = table("speakers", Speakers, strings_codec())


def speakers(story: Story) -> frozenset[str]:
    """The entities that speak somewhere in the story (some record's `speaker`); saved
    (garden/derived/tables.py)."""
    return SPEAKERS.of(story)


def owner(record: Record, people: frozenset[str]) -> str | None:
    """The one person a record is about (its `entities`), else None. Not its speaker: a
    turn is said by one person and is often about the other ("How was the race, Mel?"),
    while a note is a statement about its subject. On LoCoMo, counting turns by their
    speaker flagged a third of the ordinary questions (experiments/locomo_premise.py)."""
    about = [e for e in record.entities if e in people]
    return about[0] if len(about) == 1 else None


def without_names(query: str, names: list[str]) -> str:
    """The query with each of the names blanked out (whole words, any case)."""
    for name in sorted(names, key=len, reverse=True):
        query = re.sub(rf"(?<!\w){re.escape(name)}(?:'s)?(?!\w)", " ", query, flags=re.IGNORECASE)
    return query


def best_by_owner(ctx: QueryContext, people: frozenset[str], person: str,
                  whose=owner) -> dict[str, tuple[float, str]]:
    """Person -> (the best lexical relevance a record of theirs (`whose`: the person a
    record is about, by default) has for the query with the named person's names blanked
    out, its id), over every record of the store: what the store says about the event,
    whoever it was. Without the blanking the name itself is the strongest term, and every
    turn the named person spoke would win on it."""
    story = ctx.spec.story
    spec = story.entities.get(person)
    names = [person] + (spec.aliases if spec else []) + ([spec.name] if spec and spec.name else [])
    query = without_names(ctx.spec.query, names)
    content = without_function_words(query)
    relevance_of: dict[str, float] = {}
    for member in ctx.retriever.members().values():
        if not is_semantic(member):
            for rid, value in relevance(member, query, content, ctx.settings.semantic_floor).items():
                relevance_of[rid] = relevance_of.get(rid, 0.0) + value
    best: dict[str, tuple[float, str]] = {}
    for rid in sorted(relevance_of):
        who = whose(story.by_id[rid], people)
        if who is not None and relevance_of[rid] > best.get(who, (0.0, ""))[0]:
            best[who] = (relevance_of[rid], rid)
    return best


class Premise(StageBase, name="premise", settings=(PREMISE_RATIO,), mode="selects", needs=("packed",),
              writes=("resolution",), labels=("premise_mismatch",), title="Premise: whose evidence is it?",
              tables=(SPEAKERS,),
              drawn="warns when the best evidence is about another person than the one the question names"):
    def run(self, ctx: QueryContext) -> None:
        story = ctx.spec.story
        people = speakers(story)
        named = [e for e in ctx.resolution.entities if e in people]
        if len(named) != 1:
            return
        person = named[0]
        best = best_by_owner(ctx, people, person)
        own = best.get(person, (0.0, ""))[0]
        rivals = sorted(((s, rid, who) for who, (s, rid) in best.items() if who != person), reverse=True)
        if not rivals:
            return
        score, rid, other = rivals[0]
        ratio = score / own if own > 0 else float("inf")
        ctx.trace["premise"] = {"named": person, "own_best": round(own, 6), "other": other,
                                "other_best": round(score, 6), "evidence": rid,
                                "ratio": None if ratio == float("inf") else round(ratio, 6)}
        if ratio < ctx.settings.premise_ratio:
            return
        name_of = {e: (spec.name if spec and spec.name else e) for e, spec in story.entities.items()}
        named_name, other_name = name_of.get(person, person), name_of.get(other, other)
        for c in ctx.packed:  # the first packed item about the other person, or said by them
            if other in (owner(c.record, people), c.record.speaker):
                c.label(LABEL, f"the question names {named_name}, but this is {other_name}'s")
                break
        ctx.resolution.warnings.append(
            f"{WARNING} the question names {named_name}, but the best evidence ({rid}) is {other_name}'s, "
            f"{ratio:.2f} times {named_name}'s best: check who it was before answering")
