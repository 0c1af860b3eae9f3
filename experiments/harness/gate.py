"""What the gate's experiments (locomo_gate.py, store_gate.py) choose by, written once.

- FORCED: an `answer_at` below every support, so the gate always answers and a run
  records the packet the question gets whenever it is answered.
- `standout_ratio`: the best decisive-lane ratio a run's trace records (decide answers
  whatever the support at or above `decisive`).
- `threshold_rule`: the answer-first rule (the lowest support answering at most
  NEGATIVE_CAP of every benchmark's negatives, unless a benchmark would then answer fewer
  than ANSWER_TARGET of its answerable questions: then the highest support that still
  answers that many on each), or refuse-first (no answering floor).
- `negatives_in_folds`: foreign negatives asked of each store, each in its store's fold.
"""
from __future__ import annotations

import math
from dataclasses import replace

ANSWER_TARGET = 0.91
NEGATIVE_CAP = 0.24
FORCED = -1e9
LONGMEMEVAL_FOREIGN = 5   # foreign negatives a LongMemEval haystack is asked


def forced(story, question, **settings):
    """The question's query spec with the answer forced (`answer_at` FORCED) and `settings`:
    the packet the question gets whenever the gate answers."""
    from garden.rerank.query import QuerySpec
    from garden.rerank.stages import Settings

    return QuerySpec(story, question.text, question.as_of, settings=Settings(answer_at=FORCED, **settings))


def standout_ratio(stages: dict) -> float:
    """The largest standout ratio of a run's lanes that found something (inf when a lane's
    best stood alone), 0 when none did."""
    lanes = [lane for lane in stages.get("standout", []) if lane["best"] is not None]
    return max((math.inf if lane["ratio_infinite"] else lane["ratio"] for lane in lanes), default=0.0)


def threshold_rule(by_bench: dict[str, tuple[list[float], list[float]]], rule: str = "answer-first",
                   answer_target: float = ANSWER_TARGET, negative_cap: float = NEGATIVE_CAP) -> float:
    """`answer_at` from each benchmark's (answerable core supports, negatives' supports), by
    the rule of the module docstring (ANSWER_TARGET and NEGATIVE_CAP unless given)."""
    answering, refusing = [], []
    for core, negative in by_bench.values():
        support = sorted(core, reverse=True)
        if support:   # the highest threshold answering at least ANSWER_TARGET of the answerable core questions
            answering.append(support[max(0, math.ceil(answer_target * len(support)) - 1)])
        # the lowest answering at most NEGATIVE_CAP of the negatives: just above the first one left out
        negatives = sorted(negative, reverse=True)
        left_out = math.floor(negative_cap * len(negatives))
        refusing.append(math.nextafter(negatives[left_out], math.inf) if left_out < len(negatives) else -math.inf)
    if rule == "refuse-first":
        return max(refusing)
    return min(min(answering), max(refusing))


def negatives_in_folds(conversations, folds: dict[str, str], per_store: int | None = None) -> tuple[dict, dict]:
    """(store -> its foreign negatives, qid -> fold for every question and negative): the
    negatives drawn from the judged stores (garden/evaluation/negatives.py, `per_store`
    each, None: as many as the store's questions), each question and negative in its
    store's fold (a store without a judged question: the first LongMemEval group)."""
    from garden.evaluation.negatives import foreign_negatives

    judged = [replace(c, questions=[q for q in c.questions if q.evidence]) for c in conversations]
    negatives = foreign_negatives([c for c in judged if c.questions], per_store=per_store)
    folds = dict(folds)
    store_fold = {c.story.story: folds[q.qid] for c in conversations for q in c.questions if q.qid in folds}
    for c in conversations:
        for q in c.questions + negatives.get(c.story.story, []):
            folds.setdefault(q.qid, store_fold.get(c.story.story, "longmemeval-group-1"))
    return negatives, folds
