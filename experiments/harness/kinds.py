"""The development kinds measured question by question, written once: LoCoMo in its three
forms (chats.py) and LongMemEval, each question's ranking of turns judged by ir-measures
and the packet it is served at the default budget.

`measured` gives measure -> qid -> value for one pipeline with its settings over one
kind's stores (`only`: the questions to run, the rest skipped, for a variant that leaves
the others as they are); `negatives_answered` asks foreign negatives. The turn ranking is
`garden compare`'s rule (garden/evaluation/stores.py), to LoCoMo's depth 100 and
LongMemEval's 1,000.
"""
from __future__ import annotations

from pathlib import Path

from experiments.harness.benchmarks import NONE, longmemeval_conversations
from experiments.harness.chats import kinds

MEASURES = ("nDCG@10", "R@10", "Success@5")
PACKET = ("coverage", "answered")


def load_kinds(locomo: str, longmemeval: str, scratch: Path) -> dict[str, list]:
    """kind -> its conversations: LoCoMo's three forms and, unless `longmemeval` is `none`,
    LongMemEval's haystacks."""
    out = kinds(locomo, scratch)
    if longmemeval.lower() != NONE:
        out["longmemeval"] = longmemeval_conversations(longmemeval)
    return out


def _spec(pipeline, conv, q, given):
    from garden.pipelines.structured import StructuredPipeline
    from garden.rerank.query import QuerySpec

    if isinstance(pipeline, StructuredPipeline) and given is not None:
        return QuerySpec(conv.story, q.text, q.as_of, settings=given)
    return QuerySpec(conv.story, q.text, q.as_of)


def measured(name: str, pipeline, conversations, depth: int, settings: dict,
             only: set[str] | None = None) -> dict[str, dict[str, float]]:
    """measure -> qid -> value for one pipeline (with `settings`) over one kind's stores:
    every judged question, or those of `only`."""
    from garden.evaluation.measures import evaluate
    from garden.evaluation.packets import packet_row
    from garden.evaluation.stores import as_run, prepare, rank_both, turn_ranking
    from garden.rerank.stages import Settings

    given = Settings(**settings) if settings else None
    runs, qrels, packet = {}, {}, {m: {} for m in PACKET}
    for conv in conversations:
        judged = [q for q in conv.questions if q.evidence and (only is None or q.qid in only)]
        if not judged:
            continue
        prepare(pipeline, conv.story)
        both = rank_both(pipeline, conv, depth, judged, given, with_sittings=False)
        for q, (ranking, _) in zip(judged, both):
            runs[q.qid] = as_run(turn_ranking(conv.story, ranking, depth))
            qrels[q.qid] = {t: 1 for t in q.evidence}
            row = packet_row(q, pipeline.run(_spec(pipeline, conv, q, given)).packet, conv.story)
            packet["coverage"][q.qid] = row.covered or 0.0
            packet["answered"][q.qid] = float(row.outcome == "answered")
    if not runs:
        return {m: {} for m in (*MEASURES, *PACKET)}
    ev = evaluate(qrels, {name: runs}, MEASURES)
    return {**{m: ev.per_query[name][m] for m in MEASURES}, **packet}


def negatives_answered(pipeline, conversations, negatives: dict, settings: dict) -> dict[str, float]:
    """qid -> 1.0 when the pipeline answers the foreign negative (nothing in its store
    answers it), else 0.0."""
    from garden.rerank.stages import Settings

    given = Settings(**settings) if settings else None
    out = {}
    for conv in conversations:
        for q in negatives.get(conv.story.story, []):
            out[q.qid] = float(pipeline.run(_spec(pipeline, conv, q, given)).packet.outcome == "answered")
    return out
