"""The decide stage: does the store hold an answer to this query at all?

Whether a query is answered, and how much rides once it is, are two decisions; this
stage makes the first, once per query, before the lanes choose what rides. Its score, the
query's *support*, is calibrated against the store itself rather than one constant:

- `top`: the best live candidate's score, on the reranker's scale (each lexical member's
  relevance as a share of its saturation ceiling, the cosine above its floor, the
  structure and phrase bonuses), which is the same scale in every store;
- `held`: the largest share of the query the store holds in one place: over the best
  `HELD_DEPTH` live candidates, the idf-weighted share of the query's terms a record
  holds (scattered single-word matches hold little each);
- `known`: the idf-weighted share of the query's terms the store holds anywhere: a question
  about what this store never held asks with words it does not have.

The weights w(t) = ln(1 + N / (df(t) + 0.5)) are the store's own (N its documents, df(t)
those holding the term, a term the store lacks weighing most), so the same question asks
more of a store where its words are common. Query-performance prediction reads the first
two from a ranking (Cronen-Townsend, Zhou & Croft 2002, "Predicting query performance";
Zhou & Croft 2007 on WIG); `known` is a pre-retrieval predictor in the spirit of
He & Ounis 2004 ("Inferring query performance using pre-retrieval predictors").

    support = W_TOP * ln(top) + W_HELD * held + W_KNOWN * known + W_BIAS

answered when support >= `answer_at`; and a lane whose best stands out decisively, its
standout ratio at least `decisive` (an order of magnitude; infinite when nothing in the
store contests the query), answers whatever the support. A small curated store, whose
eligibility gate leaves a query two or three candidates, answers that way; in a
conversation of a thousand turns no question of LoCoMo's seven conversations, answerable
or not, reached a ratio of 6.9, and there the support decides. The weights are a logistic regression of
answerable against foreign negatives on LoCoMo's seven conversations, chosen and checked
by leave-one-conversation-out (experiments/locomo_gate.py; docs/packet.md gives every fold).
Fitted on LongMemEval's sample as well, no threshold of this support answers 0.90 of its
questions and at most a quarter of LoCoMo's negatives: LongMemEval's answerable questions
sit lower (long records, no notes), so the weights stay LoCoMo's and the cost is reported
(docs/longmemeval.md, "The decision on both benchmarks"). Each candidate is read by its
own match, its score over its `prior`: a rank prior (its session's rank, an unasked voice)
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
from garden.derived.tables import Codec, remembered
from garden.rerank.context import Setting, QueryContext, StageBase
from garden.retrievers import documents

ANSWER_AT = Setting("answer_at", float, -0.1, "a query whose support reaches this is answered "
                    "(experiments/locomo_gate.py)")
DECISIVE = Setting("decisive", float, 10.0, "a lane whose standout ratio reaches this answers whatever the support",
                   ge=1)

W_TOP, W_HELD, W_KNOWN, W_BIAS = 2.9, 3.45, 2.32, -1.67
HELD_DEPTH = 5
TOP_FLOOR = 1e-3   # ln(top) for a best score of 0 (nothing scored): silence, not a math error


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
    return remembered(story, "vocabulary", _vocabulary, VOCABULARY)


def _vocabulary(story) -> Vocabulary:
    docs = documents(story)
    return Vocabulary(len(docs), Counter(t for d in docs for t in set(analyze(d.text))))


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


VOCABULARY = Codec(_save_vocabulary, _load_vocabulary)


def support(top: float, held: float, known: float) -> float:
    """The formula in the module docstring."""
    return W_TOP * math.log(max(top, TOP_FLOOR)) + W_HELD * held + W_KNOWN * known + W_BIAS


def query_support(query: str, vocab: Vocabulary, ranked_texts: list[tuple[float, str]]) -> dict:
    """(the support and its parts) for `query` against a store's vocabulary and its best
    live candidates as (score, text), best first."""
    terms = list(dict.fromkeys(analyze(query)))
    weights = {t: vocab.weight(t) for t in terms}
    total = sum(weights.values())
    top = ranked_texts[0][0] if ranked_texts else 0.0
    if total <= 0:
        known = held = 0.0
    else:
        known = sum(w for t, w in weights.items() if vocab.df.get(t, 0) > 0) / total
        held = max((sum(weights[t] for t in set(analyze(text)) if t in weights) / total
                    for _, text in ranked_texts[:HELD_DEPTH]), default=0.0)
    return {"top": top, "held": held, "known": known, "support": support(top, held, known)}


def gate_score(stages: dict) -> float | None:
    """The score a structured pipeline's gate thresholds, from its trace (None: no gate ran)."""
    decided = stages.get("decide") if isinstance(stages, dict) else None
    return None if not decided else decided["support"]


class Decide(StageBase, name="decide", settings=(ANSWER_AT, DECISIVE), mode="selects", needs=("candidates",),
             reads=("window",), writes=("answers", "decisive"), title="Decide: answer, or stay silent"):
    """Answers the query or keeps it silent, by the store-calibrated support above."""

    def run(self, ctx: QueryContext) -> None:
        # each candidate's own match: a rank prior (its session's rank, an unasked voice) orders
        # what matched and says nothing of whether the store holds an answer
        own = sorted(((c.score / c.prior if c.prior > 0 else 0.0, c.id, c) for c in ctx.candidates.values()
                      if c.reason is None and c.successor is None and not c.certain), key=lambda t: (-t[0], t[1]))
        # a time the query names (window.py) says when, not what: its words are not asked of the store
        query = ctx.spec.query.replace(ctx.window.said, " ") if ctx.window is not None else ctx.spec.query
        parts = query_support(query, vocabulary(ctx.spec.story),
                              [(score, c.record.searchable) for score, _, c in own[:HELD_DEPTH]])
        threshold = ctx.settings.answer_at
        ctx.answers, ctx.decisive = parts["support"] >= threshold, ctx.settings.decisive
        ctx.trace["decide"] = {**{k: round(v, 6) for k, v in parts.items()}, "answer_at": threshold,
                               "decisive": ctx.decisive, "answers": ctx.answers}
