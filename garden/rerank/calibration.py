"""The calibration stage: the decide stage's support read against the store's own scale.

The decide stage's support (decide.py) sums what the ranking and the store's vocabulary say
of a query, but what a support is worth depends on the store: a store of long records holds
more of any question's words by chance than one of short chat lines, a store whose notes
restate its turns in a question's own register matches questions better than a raw chat
log, and one threshold fitted on one kind of store is silent on the answerable questions of
another, or answers its foreign ones (docs/longmemeval.md, "The decision on both
benchmarks"). So each store gets a reference of its own, built from the store alone and a
fixed set of questions (garden/pipelines/store_reference.py), and the threshold is set on
the support less the store's *level*:

- its known-item queries (Azzopardi, de Rijke and Balog, SIGIR 2007, "Building simulated
  queries for known-item topics"): a few discriminative words of one of its own records, a
  question it can answer in its own words; their mean support says how well this store
  matches what it holds;
- foreign questions: a fixed set of fictional everyday questions (about people, their
  hobbies, homes, work and trips; first, second and third person), each person named as
  one of the store's people, questions it was never asked to hold; the support that all
  but a tenth of them stay under says how high a question it cannot answer reaches here.

    level = KNOWN_WEIGHT * mean(known-item supports) + FOREIGN_WEIGHT * q90(foreign supports)

(decide.py, `Reference`) and the decide stage answers when support - level reaches `answer_at`. Both weights, the
support's own weights and the threshold were chosen together by the two-benchmark protocol
(experiments/store_gate.py: fourteen folds over LoCoMo's conversations, as released and as
raw chat logs, and LongMemEval's question groups; docs/packet.md, "The gate calibrated on
each store"). Without this stage (`default-calibration`), or for a store too small to draw
known-item queries from, the level is GLOBAL_LEVEL, one constant for every store: the
single threshold as before, on the same scale.

The level is a statistic of the store's reference, so it moves with what the store holds,
not with the question asked; the trace says where a query's support falls among the
store's own known-item and foreign supports (`standing`). With the cutoff off (`standout`
1) every query answers whatever its support.

The reference is drawn from three whole-store tables this stage declares, so a story whose
records live in Milvus holds them too: the vocabulary (decide.py), the store's people and
its records that a known-item query may be drawn from (`KNOWN_ITEM_POOL`: the documents
holding at least MIN_WORDS content words, in the story's order).
"""
from __future__ import annotations

import re
from functools import lru_cache

from garden.analyzer import analyze
from garden.derived.tables import ids_codec, lists_codec, table
from garden.models import People, Record
from garden.rerank.context import QueryContext, StageBase
from garden.rerank.decide import VOCABULARY

MIN_WORDS = 4
WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)


@lru_cache(maxsize=1 << 18)
def _terms(word: str) -> tuple[str, ...]:
    # a store's words repeat from record to record: each is analyzed once, not once a use
    return tuple(analyze(word))


def content_terms(text: str) -> list[tuple[str, str]]:
    """Each word of `text` that is one content term, first use of its term only, with the term."""
    words, seen = [], set()
    for word in WORD.findall(text):
        terms = _terms(word)
        if len(terms) == 1 and terms[0] not in seen:
            seen.add(terms[0])
            words.append((word, terms[0]))
    return words


class KnownItemPool:
    """The ids of the documents (records that are not control records) whose searchable
    text holds at least MIN_WORDS content words, in the story's order: what a known-item
    query is drawn from (garden/pipelines/store_reference.py), folded record by record."""

    def __init__(self, story):
        self.ids: list[str] = []

    def add(self, r: Record) -> None:
        if r.kind != "control" and len(content_terms(r.searchable)) >= MIN_WORDS:
            self.ids.append(r.id)

    def value(self) -> tuple[str, ...]:
        return tuple(self.ids)


KNOWN_ITEM_POOL = table("known_item_pool", KnownItemPool, ids_codec())
PEOPLE = table("people", People, lists_codec())   # `Story.people`: the foreign questions name them


class Calibration(StageBase, name="calibration", mode="selects", writes=("calibrated",),
                  title="Calibration: the store's own scale", tables=(VOCABULARY, KNOWN_ITEM_POOL, PEOPLE),
                  drawn=("the store's own level, from its reference: its known-item queries and fixed foreign "
                         "questions, run once per store's content and saved"),
                  shown_with="lanes"):
    """Arms the store's reference for the decide stage (built once per store's content and
    pipeline, and saved: garden/pipelines/store_reference.py). It only selects: a ranking
    stops before it, and never builds a reference."""


    def run(self, ctx: QueryContext) -> None:
        if ctx.reference is None:
            return   # a pipeline that gives no reference keeps the global level
        ctx.calibrated = ctx.reference()
        if ctx.calibrated is None:
            ctx.trace["calibration"] = {"reference": None, "why": "too few records to draw known-item queries from"}
        else:
            ctx.trace["calibration"] = {"reference": {"known": len(ctx.calibrated.known),
                                                      "foreign": len(ctx.calibrated.foreign)}}
