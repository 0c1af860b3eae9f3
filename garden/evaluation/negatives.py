"""Unanswerable questions built from a set of stores: the negatives that let a comparison
say when silence is right.

A benchmark like LoCoMo asks only questions whose answer its store holds, so a pipeline
that never stays silent looks best on it. `foreign` negatives pose each store's questions
to another store of the same set, with every person the question names (a person of its
own store, by name) replaced by one of the receiving store's people: the question then
names the right people but asks about what this store never held. Its judgment is
"nothing in this store answers it": no relevant record at all.

The people of a store are the speakers of its records, in the order they first speak
(a store's first speaker stands in for the other store's first, and so on round). Which
questions a store receives is a seeded sample, the same count for every store, drawn from
the questions of every other store of the set; it is deterministic for a seed. A swapped
question can, by chance, be answerable in the receiving store (a generic question about a
person's weekend); such noise counts against every pipeline alike, and the report says how
the negatives were built.
"""
from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from garden.errors import GardenError

if TYPE_CHECKING:  # annotations only: the command line reads NEGATIVE_KINDS without loading the comparison
    from garden.evaluation.stores import Conversation, Question

NEGATIVE_KINDS = ("foreign",)
FOREIGN_HOW = ("each store is asked a seeded sample of the other stores' questions, every name of a person of "
               "the asking store replaced by the person of this store who first spoke at the same position")
SEED = 0


def people(story) -> list[list[str]]:
    """The store's speakers in the order they first speak, each as the names it goes by
    (`Story.people`)."""
    return story.people


def swap_people(text: str, source: Sequence[Sequence[str]], target: Sequence[Sequence[str]]) -> str:
    """`text` with each whole-word name of a `source` person replaced by the name of the
    `target` person at the same position (round the target list when it is shorter).
    Longer names first, so that a name that contains another is replaced whole."""
    if not source or not target:
        return text
    mapping = {name: target[i % len(target)][0] for i, names in enumerate(source) for name in names}
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def per_store_default(conversations: Sequence["Conversation"]) -> int:
    """The same count for every store: as many as the smallest store has questions of its own."""
    return min(len(c.questions) for c in conversations)


def foreign_negatives(conversations: Sequence["Conversation"], per_store: int | None = None,
                      seed: int = SEED) -> dict[str, list["Question"]]:
    """Story name -> the foreign negatives it is asked (see the module docstring)."""
    if len(conversations) < 2:
        raise GardenError("foreign negatives need at least two stores in the set: a store's questions are "
                          "posed to another store")
    if per_store is not None and per_store < 1:
        raise GardenError(f"negatives per store must be at least 1 (got {per_store})")
    count = per_store_default(conversations) if per_store is None else per_store
    who = [people(c.story) for c in conversations]
    out: dict[str, list[Question]] = {}
    for i, target in enumerate(conversations):
        name, to = target.story.name, who[i]
        # sorted, so that the sample does not depend on the order the stores are given in
        pool = sorted(((j, q) for j, other in enumerate(conversations) if j != i for q in other.questions),
                      key=lambda pair: pair[1].qid)
        rng = random.Random(f"{seed}/{name}")  # one stream per store: adding a store leaves the others alone
        chosen = rng.sample(pool, min(count, len(pool)))
        chosen.sort(key=lambda pair: pair[1].qid)
        as_of = max((q.as_of for q in target.questions), default=None) or chosen[0][1].as_of
        out[name] = [replace(q, qid=f"{name}/foreign:{q.qid}", text=swap_people(q.text, who[j], to),
                             evidence=[], as_of=as_of, negative="foreign", source=q.qid)
                     for j, q in chosen]
    return out
