"""The development table on four kinds of chat: LoCoMo as released, as raw chat logs, in
the messaging form (experiments/harness/chats.py), and LongMemEval.

Every question with an evidence turn runs through each pipeline: its ranking of turns
(`garden compare`'s rule, at LoCoMo's depth 100 and LongMemEval's 1000) judged by turn
nDCG@10, R@10 and Success@5 (ir-measures), and the packet it serves at the default budget:
evidence coverage (a silent packet counting 0) and the share answered. The folds are
experiments/harness/folds.py's: LoCoMo's conversations (a conversation's three forms in
one fold) and LongMemEval's questions dealt into seven groups. A pipeline with nothing to
choose is its own held-out figure; a variant with a choice (a stage's setting, SETTINGS
below) is chosen on the other folds of its kind and of every other kind together (the
mean over kinds of turn nDCG@10, each kind weighing the same) and scored on the held-out
fold, as experiments/chat_protocol.py does.

    .venv/bin/python experiments/chat_kinds.py [--locomo PATH] [--longmemeval FILE|none]
        [--pipelines bm25s,hybrid,default] [--variants NAME,...] [--out DIR] [--reuse]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0. LongMemEval: Wu et al., ICLR 2025, MIT.
`--reuse` reads the rows the last run saved (chat_kinds_rows.json) and adds what is asked
and missing.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import DEPTH  # noqa: E402
from experiments.harness.chats import shape  # noqa: E402
from experiments.harness.folds import folds_of, hold_out_questions  # noqa: E402
from experiments.harness.kinds import (MEASURES, PACKET, ask_negatives, load_kinds, measured,  # noqa: E402
                                       kind_arguments, saved_rows)
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.measures import randomization_p  # noqa: E402

# variant name -> (pipeline, the points of its grid): what a stage's setting is chosen among by
# the folds; the pipeline as it is, measured under its own name, is a point too
SETTINGS: dict[str, tuple[str, list[dict]]] = {
    "exchange": ("default", [{"exchange_share": v} for v in (0.25, 0.5)]),
    "perspective": ("default", [{"perspective_share": v} for v in (0.1, 0.3)]),
    "spread": ("default", [{"sitting_spread": v} for v in (0.1, 0.3)]),
}


def negatives_table(rows: dict, held_out: dict, chosen: dict) -> None:
    """Adds "negatives answered" to each row of `held_out` whose negatives were measured: a
    variant's negative scored by the point its store's fold was scored by."""
    answered = rows.get("negatives", {})
    for kind, per in held_out.items():
        folds = rows.get("negative_folds", {}).get(kind, {})
        for name, row in per.items():
            if name in chosen:
                picks = {q: chosen[name].get(f) for q, f in folds.items()}
                if picks and all(p in answered and kind in answered[p] for p in set(picks.values())):
                    row["negatives answered"] = float(np.mean([answered[p][kind][q] for q, p in picks.items()]))
            elif kind in answered.get(name, {}):
                row["negatives answered"] = float(np.mean(list(answered[name][kind].values())))


def table(scores: dict, folds: dict, names: list[str]) -> dict:
    """kind -> name -> measure -> held-out mean (and for a variant, "<measure> p": the paired
    randomization test's p against the pipeline as it is), and variant -> fold -> the point
    it was scored by. A name of SETTINGS is scored per fold by the
    setting chosen on the other folds (see the module docstring); any other is itself."""
    out: dict = {kind: {} for kind in folds}
    chosen: dict = {}
    for name in names:
        if name in scores:
            for kind in (k for k in folds if k in scores[name]):
                out[kind][name] = {m: float(np.mean(list(v.values()))) for m, v in scores[name][kind].items()}
            continue
        points = sorted(n for n in scores if n.startswith(f"{name}@"))
        if not points or SETTINGS[name][0] not in scores:
            continue
        points.append(SETTINGS[name][0])

        base = SETTINGS[name][0]

        def objective(point: str, train: dict[str, list[str]]) -> tuple:
            """The mean over kinds of turn nDCG@10; a tie kept by the pipeline as it is, then by name."""
            per = [np.mean([scores[point][k]["nDCG@10"][q] for q in qids]) for k, qids in train.items() if qids]
            return float(np.mean(per)), point == base, point

        # the kinds every point was measured on: a choice is made on those alone
        measured_on = {k: per for k, per in folds.items() if all(k in scores[p] for p in points)}
        picked, held = hold_out_questions(measured_on, lambda train: max(points, key=lambda p: objective(p, train)))
        chosen[name] = dict(picked)
        for kind, per in held.items():
            qids = sorted(per)
            row = {}
            for m in (*MEASURES, *PACKET):
                got = np.array([scores[per[q]][kind][m][q] for q in qids])
                was = np.array([scores[base][kind][m][q] for q in qids])
                row[m] = float(got.mean())
                row[f"{m} p"] = randomization_p(got, was)
            out[kind][name] = row
    return out, chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", default="bm25s,hybrid,default", help="pipelines measured as they are")
    parser.add_argument("--variants", default="", help=f"settings chosen by the folds: {', '.join(SETTINGS)}")
    args = kind_arguments(parser, argv)
    from garden.pipelines import make_pipeline

    out = Path(args.out)
    saved, rows = saved_rows(out, "chat_kinds_rows.json", args.reuse)
    scores = rows["scores"]
    names = [p for p in args.pipelines.split(",") if p]
    variants = [v for v in args.variants.split(",") if v]
    wanted = [(p, p, {}) for p in names]
    for v in variants:
        base, grid = SETTINGS[v]
        wanted += [(f"{v}@{json.dumps(point, sort_keys=True)}", base, point) for point in grid]
    with tempfile.TemporaryDirectory() as scratch:
        data = load_kinds(args.locomo, args.longmemeval, Path(scratch))
    rows["shape"] = {k: shape(convs) for k, convs in data.items() if k.startswith("locomo")}
    for kind, convs in data.items():
        rows["folds"][kind] = folds_of("longmemeval" if kind == "longmemeval" else "locomo", convs)
        depth = DEPTH["longmemeval" if kind == "longmemeval" else "locomo"]
        for label, base, point in wanted:
            if kind in scores.get(label, {}):
                continue
            scores.setdefault(label, {})[kind] = measured(label, make_pipeline(base), convs, depth, point)
            print(f"{kind} under {label} measured", flush=True)
            out.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(rows))
        if args.negatives:
            ask_negatives(rows, kind, convs, args.negatives,
                          [(label, make_pipeline(base), point) for label, base, point in wanted],
                          lambda: saved.write_text(json.dumps(rows)))
    held_out, chosen = table(scores, rows["folds"], names + variants)
    negatives_table(rows, held_out, chosen)
    report = {"shape": rows["shape"], "held_out": held_out, "chosen": chosen}
    for kind, per in report["held_out"].items():
        n = len(rows["folds"][kind])
        print(f"\n{kind} ({n} questions)")
        print(f"  {'pipeline':<16}" + "".join(f"{m:>10}" for m in (*MEASURES, *PACKET, "negatives")))
        for name, row in per.items():
            print(f"  {name:<16}" + "".join(f"{row[m]:>10.3f}" for m in (*MEASURES, *PACKET))
                  + (f"{row['negatives answered']:>10.3f}" if "negatives answered" in row else ""))
    for name, per in chosen.items():
        print(f"\n{name}: the point each fold was scored by")
        for fold, point in per.items():
            print(f"  {fold}: {point}")
    write_json(out / "chat_kinds.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
