"""Choose the conversation weights of `default` by leave-one-conversation-out on LoCoMo.

The weights: `semantic_weight` (what the embedding member counts beside the lexical one),
`cited_share` and `cited_spread` (what a matching note or view passes to the turns it
cites), `context_share` (what a turn receives from its best neighbour). For every point of
the grid below, `default` ranks every judged question of the seven conversations with
those settings (judged by the evidence turns, as `garden compare` judges them). Then, for
each conversation in turn, the point with the best mean nDCG@10 on the *other six* is
chosen and scored on the held-out one; the held-out scores together are the honest figure,
and the points chosen per fold show whether the choice is stable. The shipped defaults are
the point chosen most often (every fold, when the choice is stable).

    .venv/bin/python experiments/locomo_weights.py [PATH] [--out experiments/out]

PATH defaults to ../shared/data/locomo. LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from garden.evaluation.compare import evaluate
from garden.evaluation.locomo import (DEPTH, TURN_MEASURES, _as_run, _prepare, _rank_conversation, load_conversations,
                                      turn_ranking)
from garden.models import SETTING_DEFAULTS, Settings
from garden.pipelines import make_pipeline

GRID = {
    "semantic_weight": (0.5, 1.0),
    "cited_share": (0.5, 1.0, 1.5),
    "cited_spread": (0.25, 0.5),
    "context_share": (0.25, 0.5, 0.75),
}
CHOOSE_BY = "nDCG@10"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default="../shared/data/locomo")
    ap.add_argument("--out", default="experiments/out")
    args = ap.parse_args(argv)
    conversations = load_conversations(args.path)
    pipeline = make_pipeline("default")
    for conv in conversations:
        _prepare(pipeline, conv.story)
    points = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    # point -> conversation -> metric -> per-question values
    scores: dict[int, dict[str, dict[str, np.ndarray]]] = {}
    for n, point in enumerate(points):
        scores[n] = {}
        for conv in conversations:
            rankings = _rank_conversation(pipeline, conv, DEPTH, settings=Settings(**point))
            run = {q.qid: _as_run(turn_ranking(conv.story, r, DEPTH)) for q, r in zip(conv.questions, rankings)}
            qrels = {q.qid: {t: 1 for t in q.evidence} for q in conv.questions}
            ev = evaluate(qrels, {"p": run}, TURN_MEASURES)
            scores[n][conv.story.story] = {m: ev.values("p", m) for m in TURN_MEASURES}
        overall = {m: float(np.concatenate([scores[n][c][m] for c in scores[n]]).mean()) for m in TURN_MEASURES}
        print(f"{n + 1:2d}/{len(points)} {point} " + " ".join(f"{m} {v:.3f}" for m, v in overall.items()), flush=True)
    names = [c.story.story for c in conversations]
    folds, held_out = [], {m: [] for m in TURN_MEASURES}
    for held in names:
        def train(n: int) -> float:
            return float(np.concatenate([scores[n][c][CHOOSE_BY] for c in names if c != held]).mean())

        best = max(range(len(points)), key=lambda n: (round(train(n), 12), -n))
        folds.append({"held_out": held, "chosen": points[best], f"train {CHOOSE_BY}": train(best),
                      **{f"held-out {m}": float(scores[best][held][m].mean()) for m in TURN_MEASURES}})
        for m in TURN_MEASURES:
            held_out[m].append(scores[best][held][m])
    loo = {m: float(np.concatenate(v).mean()) for m, v in held_out.items()}
    chosen = Counter(json.dumps(f["chosen"], sort_keys=True) for f in folds).most_common()
    shipped = {k: SETTING_DEFAULTS[k] for k in GRID}
    print("\nleave-one-conversation-out (each conversation scored with the point chosen on the other six):")
    for f in folds:
        print(f"  {f['held_out']}: chosen {f['chosen']}  held-out nDCG@10 {f['held-out nDCG@10']:.3f}")
    print("  held-out figures over all questions: " + " ".join(f"{m} {v:.3f}" for m, v in loo.items()))
    print(f"  points chosen: {chosen}")
    print(f"  shipped defaults: {shipped}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "locomo_weights.json").write_text(json.dumps({
        "grid": GRID, "choose_by": CHOOSE_BY, "folds": folds, "held_out": loo, "shipped": shipped,
        "points": [{"point": p, **{m: float(np.concatenate([scores[n][c][m] for c in names]).mean())
                                   for m in TURN_MEASURES}} for n, p in enumerate(points)]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
