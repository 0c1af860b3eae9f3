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

import argparse
import json
from pathlib import Path

from experiments.harness.benchmarks import NONE, arguments, longmemeval_conversations
from experiments.harness.chats import kinds

MEASURES = ("nDCG@10", "R@10", "Success@5")
PACKET = ("coverage", "answered")


def load_kinds(locomo: str, longmemeval: str, scratch: Path) -> dict[str, list]:
    """kind -> its conversations: LoCoMo's three forms and LongMemEval's haystacks, each
    unless given as `none`."""
    out = kinds(locomo, scratch) if locomo.lower() != NONE else {}
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


def kind_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments of an experiment over the development kinds: `--locomo`,
    `--longmemeval` (or `none`), `--out`, `--reuse`, and `--negatives N`, the foreign
    negatives asked of each LoCoMo store (LongMemEval's: the harness's fixed count)."""
    parser.add_argument("--negatives", type=int, default=0,
                        help="foreign negatives asked of each LoCoMo store (LongMemEval: LONGMEMEVAL_FOREIGN); 0 none")
    return arguments(parser, ("locomo", "longmemeval"), argv, reuse="add to the rows the last run saved",
                     optional=("locomo", "longmemeval"))


def saved_rows(out: Path, name: str, reuse: bool) -> tuple[Path, dict]:
    """Where an experiment's rows are saved, and the rows the last run saved when `reuse`
    (else none yet): measured figures and folds, added to as the run goes."""
    saved = out / name
    return saved, json.loads(saved.read_text()) if reuse and saved.exists() else {"scores": {}, "folds": {}}


def ask_negatives(rows: dict, kind: str, conversations, count: int, wanted, save) -> None:
    """Foreign negatives for one kind's stores (`count` a LoCoMo store, LongMemEval's fixed
    number), placed in their store's fold (`rows["negative_folds"]`), asked of each
    (label, pipeline, settings) of `wanted` not asked yet (`rows["negatives"]`), the rows
    saved (`save()`) after each."""
    from experiments.harness.gate import LONGMEMEVAL_FOREIGN, negatives_in_folds

    per_store = LONGMEMEVAL_FOREIGN if kind == "longmemeval" else count
    negatives, folds = negatives_in_folds(conversations, rows["folds"][kind], per_store=per_store)
    rows.setdefault("negative_folds", {})[kind] = {q.qid: folds[q.qid] for qs in negatives.values() for q in qs}
    for label, pipeline, point in wanted:
        if kind not in rows.setdefault("negatives", {}).get(label, {}):
            rows["negatives"].setdefault(label, {})[kind] = negatives_answered(pipeline, conversations, negatives,
                                                                               point)
            print(f"{kind}'s negatives under {label} asked", flush=True)
            save()
