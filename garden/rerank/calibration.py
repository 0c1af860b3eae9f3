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
"""
from __future__ import annotations

from garden.rerank.context import QueryContext, StageBase


class Calibration(StageBase, name="calibration", mode="selects", writes=("calibrated",),
                  title="Calibration: the store's own scale"):
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
