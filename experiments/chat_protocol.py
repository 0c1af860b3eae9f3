"""The selection protocol on both development benchmarks: LoCoMo and LongMemEval together.

A setting of `default` is chosen where it must hold: on the pooled training folds of both
benchmarks, and reported as its held-out-fold figure on each. The folds are LoCoMo's
conversations (seven) and LongMemEval's questions dealt into seven groups (sorted by type,
then id, and dealt in turn, so every group holds every type); fourteen folds in all. For
each fold, the point of the grid is chosen on the other thirteen by the objective below,
and the fold is scored with it. The held-out figures of a benchmark are its folds' figures
together, each scored by a point it did not choose. The point shipped is the one chosen
most often. It is kept only if neither benchmark's held-out figures lose significantly
against REFERENCE (the point shipped before; paired randomization, 10,000 worlds, per
benchmark and measure); a point that helps one benchmark and costs the other is reported,
not shipped.

The objective: for each benchmark, the mean over its training questions of turn nDCG@10
and session nDCG@10 (a session is ranked where its first turn is); the two benchmarks
weigh the same, whatever their question counts. Judged by each benchmark's evidence turns,
as `garden compare` judges them (LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0;
LongMemEval: Wu et al., ICLR 2025, MIT: the turns marked has_answer in evidence sessions,
of either role), by ir-measures.

    .venv/bin/python experiments/chat_protocol.py [--locomo PATH] [--longmemeval FILE] [--out DIR] [--reuse]

The grid is GRID below: the settings of the stages that read a chat's structure (what the
store's own voice counts unasked, addressee.py; what a turn of the best session gains,
sessions.py). `--reuse` chooses again from the measures the last run saved.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import DEPTH, MEASURES, arguments, load_chats  # noqa: E402
from experiments.harness.folds import folds_of, hold_out_questions  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.measures import evaluate, randomization_p  # noqa: E402
from garden.evaluation.stores import sessions_run, turn_ranking  # noqa: E402
from garden.pipelines import make_pipeline  # noqa: E402
from garden.rerank.query import QuerySpec  # noqa: E402
from garden.rerank.stages import Settings  # noqa: E402

GRID = {"unasked": (0.2, 0.4, 0.6, 1.0), "session_weight": (0.0, 0.5, 1.0, 2.0, 4.0)}
REFERENCE = {"unasked": 1.0, "session_weight": 0.0}


def measure_point(bench: str, conversations, point: dict) -> dict[str, dict[str, float]]:
    """measure -> qid -> value, for turn and session level, under `default` with `point`."""
    pipeline = make_pipeline("default")
    turn_runs, session_runs, turn_qrels, session_qrels = {}, {}, {}, {}
    for conv in conversations:
        session_of = conv.sessions()
        for q in conv.questions:
            if not q.evidence:
                continue
            spec = QuerySpec(conv.story, q.text, q.as_of, settings=Settings(candidates=DEPTH[bench], **point))
            turns = turn_ranking(conv.story, pipeline.ranking(spec, DEPTH[bench]).by_relevance(DEPTH[bench]),
                                 DEPTH[bench])
            turns = [t for t in turns if t in session_of]
            sessions = sessions_run(turns, session_of)
            turn_runs[q.qid] = [(t, float(len(turns) - i)) for i, t in enumerate(turns)]
            session_runs[q.qid] = [(s, float(len(sessions) - i)) for i, s in enumerate(sessions)]
            turn_qrels[q.qid] = {t: 1 for t in q.evidence}
            session_qrels[q.qid] = {session_of[t]: 1 for t in q.evidence if t in session_of}
    out = {}
    for level, qrels, run in (("turn", turn_qrels, turn_runs), ("session", session_qrels, session_runs)):
        ev = evaluate(qrels, {"p": run}, MEASURES)
        for m in MEASURES:
            out[f"{level} {m}"] = ev.per_query["p"][m]
    return out


def objective(scores: dict, train: dict[str, list[str]]) -> float:
    """The mean over benchmarks of (turn nDCG@10 + session nDCG@10) / 2 over their training questions."""
    values = []
    for bench, qids in train.items():
        if qids:
            values.append(np.mean([(scores[bench]["turn nDCG@10"][q] + scores[bench]["session nDCG@10"][q]) / 2
                                   for q in qids]))
    return float(np.mean(values))


def main(argv: list[str] | None = None) -> int:
    args = arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), ("locomo", "longmemeval"), argv,
                     reuse="choose again from the measures saved by the last run")
    points = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    out = Path(args.out)
    saved = out / "chat_protocol_rows.json"
    if args.reuse:
        scores = json.loads(saved.read_text())["scores"]
    else:
        data = load_chats(args.locomo, args.longmemeval)
        folds = {b: folds_of(b, convs) for b, convs in data.items()}
        scores = {}
        for n, point in enumerate(points):
            # a setting the benchmark's stores never read gives the same figures: LoCoMo names no addressee
            scores[str(n)] = {b: measure_point(b, convs, point) for b, convs in data.items()}
            print(f"point {n + 1}/{len(points)} {point} measured", flush=True)
        out.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"points": points, "folds": folds, "scores": scores}))
    folds = json.loads(saved.read_text())["folds"]
    reference = str(points.index(REFERENCE))
    picked, held = hold_out_questions(folds, lambda train: max(scores, key=lambda n: (objective(scores[n], train),
                                                                                      -int(n))))
    chosen = [{"held_out": fold, "chosen": points[int(best)]} for fold, best in picked]
    print("\nfolds (each scored by the point chosen on the other thirteen):")
    for c in chosen:
        print(f"  {c['held_out']}: {c['chosen']}")
    report = {"grid": GRID, "reference": REFERENCE, "folds": chosen, "held_out": {}, "points": []}
    for b, per in held.items():
        qids = sorted(per)
        row = {}
        for m in (f"{level} {m}" for level in ("turn", "session") for m in MEASURES):
            got = np.array([scores[per[q]][b][m][q] for q in qids])
            ref = np.array([scores[reference][b][m][q] for q in qids])
            row[m] = {"held_out": float(got.mean()), "reference": float(ref.mean()),
                      "p": randomization_p(got, ref)}
        report["held_out"][b] = row
        print(f"\n{b} held out ({len(qids)} questions):")
        for m, v in row.items():
            print(f"  {m:<18} {v['held_out']:.4f}  reference {v['reference']:.4f}  p {v['p']:.3f}")
    counts = Counter(json.dumps(c["chosen"], sort_keys=True) for c in chosen).most_common()
    print(f"\npoints chosen: {counts}")
    for n, point in enumerate(points):
        report["points"].append({"point": point, **{f"{b} {m}": float(np.mean(list(scores[str(n)][b][m].values())))
                                                    for b in folds for m in scores[str(n)][b]}})
    write_json(out / "chat_protocol.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
