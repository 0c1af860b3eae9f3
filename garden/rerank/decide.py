"""The decide stage: does the store hold an answer to this query at all?

Whether a query is answered, and how much rides once it is, are two decisions; this
stage makes the first, once per query, before the lanes choose what rides. Its score, the
query's *support*, reads the ranking and the store's vocabulary:

- `top`: the best live candidate's score, on the reranker's scale (each lexical member's
  relevance as a share of its saturation ceiling, the cosine above its floor, the
  structure and phrase bonuses);
- `held`: the largest share of the query the store holds in one place: over the best
  `HELD_DEPTH` live candidates, the idf-weighted share of the query's terms a record
  holds (scattered single-word matches hold little each);
- `known`: the idf-weighted share of the query's terms the store holds anywhere: a question
  about what this store never held asks with words it does not have;
- `second`: the second-best live candidate's score: a store that holds an answer often
  holds it, or what surrounds it, in more than one place, where a question it cannot
  answer meets one stray match at best.

The weights w(t) = ln(1 + N / (df(t) + 0.5)) are the store's own (N its documents, df(t)
those holding the term, a term the store lacks weighing most), so the same question asks
more of a store where its words are common. Query-performance prediction reads `top`,
`held` and `second` from a ranking (Cronen-Townsend, Zhou & Croft 2002, "Predicting query
performance"; Zhou & Croft 2007 on WIG, which reads the top k rather than the top one);
`known` is a pre-retrieval predictor in the spirit of He & Ounis 2004 ("Inferring query
performance using pre-retrieval predictors").

    support = W_TOP ln(top) + W_HELD held + W_KNOWN known + W_SECOND ln(second) + W_BIAS

What a support is worth still depends on the store (long records hold more of any
question's words by chance; notes written in a question's own register match questions
better than a raw chat log), so it is read against the store's *level*: the mean
support of the store's own known-item queries and the 90th percentile of its foreign
questions' (`Reference`; built by garden/pipelines/store_reference.py, armed by the
calibration stage), or GLOBAL_LEVEL for a store without a reference:

    level = KNOWN_WEIGHT mean(known-item supports) + FOREIGN_WEIGHT q90(foreign supports)

A query is answered when support - level reaches `answer_at`; and a lane whose best stands
out decisively, its standout ratio at least `decisive` (an order of magnitude; infinite
when nothing in the store contests the query), answers whatever the support. A small
curated store, whose eligibility rules leave a query two or three candidates, answers that
way; in a conversation of a thousand turns no question of LoCoMo's seven conversations,
answerable or not, reached a ratio of 6.9, and there the support decides. The support's
weights, the level's and the threshold were chosen together by the two-benchmark protocol
(experiments/store_gate.py: fourteen folds over LoCoMo's conversations, as released and as
raw chat logs, and LongMemEval's question groups; docs/packet.md, "The gate calibrated on
each store", gives every fold and every variant tried). Each candidate is read by its own
match, its score over its `prior`: a rank prior (its session's rank, an unasked voice)
orders what matched and says nothing of whether the store holds an answer.
Silence needs the cutoff armed: with `standout` 1 (the cutoff off) every query answers.
Items reached by a certain route (an id the query names) ride either way (lanes.py).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from garden._state import State
from garden.analyzer import analyze
from garden.derived.tables import Codec, table
from garden.models import Record
from garden.rerank.context import Setting, QueryContext, StageBase
from garden.rerank.support import (FOREIGN_LEVEL, FOREIGN_WEIGHT, GLOBAL_LEVEL, KNOWN_WEIGHT, PARTS,  # noqa: F401
                                   TOP_FLOOR, W_BIAS, W_HELD, W_KNOWN, W_SECOND, W_TOP, WEIGHTS, Reference,
                                   Verdict, features, support, supports)

ANSWER_AT = Setting("answer_at", float, -5.61, "a query whose support less its store's level reaches this is "
                    "answered (experiments/store_gate.py)")
GATHER_HELD = Setting("gather_held", int, 0, "1: a gathering question's support reads the share of its words "
                      "the union of its best records holds (decide.py); 0: the most one record holds", ge=0, le=1)
DECISIVE = Setting("decisive", float, 10.0, "a lane whose standout ratio reaches this answers whatever the support",
                   ge=1)

HELD_DEPTH = 5


@dataclass(frozen=True)
class Vocabulary:
    """Document frequencies of the store's terms, as every lexical retriever analyzes them."""
    documents: int
    df: Counter

    def weight(self, term: str) -> float:
        return math.log(1.0 + self.documents / (self.df.get(term, 0) + 0.5))


def vocabulary(story) -> Vocabulary:
    """The store's vocabulary, made once per story's content and saved
    (garden/derived/tables.py): made again, it analyzes every record."""
    return VOCABULARY.of(story)


class Terms:
    """The vocabulary, folded record by record (garden/derived/tables.py): each document
    (a record that is not a control record) counts once for every term its searchable text
    holds, as the indexes read it (garden.retrievers.documents)."""

    def __init__(self, story):
        self.documents = 0
        self.df: Counter = Counter()

    def add(self, r: Record) -> None:
        if r.kind != "control":
            self.documents += 1
            self.df.update(set(analyze(r.searchable)))

    def value(self) -> Vocabulary:
        return Vocabulary(self.documents, self.df)


def _save_vocabulary(vocab: Vocabulary) -> State:
    state = State(meta={"documents": vocab.documents})
    state.put_strings("terms", list(vocab.df))
    state.put("df", np.array(list(vocab.df.values()), dtype=np.int64))
    return state


def _load_vocabulary(state: State) -> Vocabulary:
    terms = state.strings("terms")
    df = state.array("df", "i", 1, len(terms))
    if len(df) and int(df.min()) < 1:
        raise ValueError("array 'df' holds a count under 1")
    return Vocabulary(int(state.number("documents", 0)), Counter(dict(zip(terms, df.tolist()))))


VOCABULARY = table("vocabulary", Terms, Codec(_save_vocabulary, _load_vocabulary))


def query_support(query: str, vocab: Vocabulary, ranked_texts: list[tuple[float, str]],
                  over_set: bool = False) -> dict:
    """(the support and its parts) for `query` against a store's vocabulary and its best
    live candidates as (score, text), best first. With `over_set` (a gathering question,
    `gather_held`), `held` is the share the best records hold together, not one alone."""
    terms = list(dict.fromkeys(analyze(query)))
    weights = {t: vocab.weight(t) for t in terms}
    total = sum(weights.values())
    top = ranked_texts[0][0] if ranked_texts else 0.0
    second = ranked_texts[1][0] if len(ranked_texts) > 1 else 0.0
    if total <= 0:
        known = held = 0.0
    else:
        known = sum(w for t, w in weights.items() if vocab.df.get(t, 0) > 0) / total
        held_by = [set(analyze(text)) & set(weights) for _, text in ranked_texts[:HELD_DEPTH]]
        if over_set:
            held_by = [set().union(*held_by)]
        held = max((sum(weights[t] for t in terms) / total for terms in held_by), default=0.0)
    return {"top": top, "held": held, "known": known, "second": second,
            "support": support(top, held, known, second)}


def gate_score(stages: dict) -> float | None:
    """The score a structured pipeline's gate thresholds (the support less the store's
    level), from its trace (None: no gate ran)."""
    decided = stages.get("decide") if isinstance(stages, dict) else None
    return None if not decided else decided["calibrated"]


class Decide(StageBase, name="decide", settings=(ANSWER_AT, DECISIVE, GATHER_HELD), mode="selects",
             needs=("candidates",), reads=("window", "calibrated", "shape"), writes=("verdict",),
             title="Decide: answer, or stay silent",
             tables=(VOCABULARY,),
             drawn=("answer or stay silent: the query's support (its top score, what one record holds of it, what the"
                    " store knows of its words, its second match) against the store's level"),
             step="verdict", shown_with="lanes"):
    """Answers the query or keeps it silent, by its support against the store's level."""


    def run(self, ctx: QueryContext) -> None:
        # each candidate's own match: a rank prior (its session's rank, an unasked voice) orders
        # what matched and says nothing of whether the store holds an answer
        own = sorted(((c.score / c.prior if c.prior > 0 else 0.0, c.id, c) for c in ctx.candidates.values()
                      if c.reason is None and c.successor is None and not c.certain), key=lambda t: (-t[0], t[1]))
        # a time the query names (window.py) says when, not what: its words are not asked of the store
        query = ctx.spec.query.replace(ctx.window.said, " ") if ctx.window is not None else ctx.spec.query
        over_set = bool(ctx.settings.gather_held) and ctx.shape is not None and ctx.shape.gathering
        parts = query_support(query, vocabulary(ctx.spec.story),
                              [(score, c.record.searchable) for score, _, c in own[:HELD_DEPTH]], over_set)
        reference = ctx.calibrated
        level = reference.level() if reference is not None else GLOBAL_LEVEL
        calibrated = parts["support"] - level
        threshold = ctx.settings.answer_at
        # the verdict, rounded as the trace shows it: the lanes answer by it (or by a ratio of at least
        # `decisive`), the packet's gate and a store's reference are made of it
        ctx.verdict = Verdict(**{k: round(v, 6) for k, v in parts.items()}, level=round(level, 6),
                              calibrated=round(calibrated, 6), answer_at=threshold,
                              threshold=round(level + threshold, 6), decisive=ctx.settings.decisive,
                              answers=calibrated >= threshold,
                              standing=reference.standing(parts["support"]) if reference is not None else None)
        ctx.trace["decide"] = ctx.verdict.traced()
