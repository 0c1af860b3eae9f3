"""Questions that gather, on the development kinds: what each setting of the gather stage
is worth held out, per kind and per question shape.

Every judged question of LoCoMo's three forms and LongMemEval's development sample runs
under `default` as shipped; a point of a grid (a gather setting) runs again only the
questions the shape rule reads as gathering, since a pinpoint question's ranking and
packet are those of `default` by construction (the stage returns at once; `--check N`
runs N pinpoint questions a kind under every point and refuses a run where one differs).

The choice (experiments/harness/folds.py: LoCoMo's conversations, a conversation's three
forms one fold, and LongMemEval's questions dealt into seven groups): for each fold, the
point with the best objective on the other folds, ties kept by `default`, and the fold
scored with it. The objective weighs the two shapes as real chats hold them, about half
and half, not as LoCoMo does (15% gathering): per kind, half the mean turn nDCG@10 of the
questions the rule reads as gathering and half that of the pinpoint ones, the kinds
weighing the same; a setting of the packet (`gather_sittings`, `gather_held`) is chosen by
packet coverage the same way (CHOSEN_BY).

Reported per kind and per class: every question, the two shapes (the rule's), the gold
gathering class (evidence in two or more sittings: read from the judgments, the class the
issue develops on), and each benchmark category; turn nDCG@10, R@10, Success@5, packet
coverage and the share answered, each with the paired randomization test's p against
`default` (10,000 worlds).

    .venv/bin/python experiments/gathering.py [--locomo PATH] [--longmemeval FILE|none]
        [--variants focus,facets,sittings,held] [--negatives N] [--check N] [--out DIR] [--reuse]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0. LongMemEval: Wu et al., ICLR 2025, MIT.
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
from experiments.harness.folds import folds_of, hold_out_questions  # noqa: E402
from experiments.harness.kinds import (MEASURES, PACKET, ask_negatives, load_kinds, measured,  # noqa: E402
                                       kind_arguments, saved_rows)
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.measures import randomization_p  # noqa: E402
from garden.rerank.shape import shape_of  # noqa: E402

BASE = "default"
GATHERING_WEIGHT = 0.5   # the gathering shape's weight in the objective: about half of real chats' questions
# the measure a grid is chosen by: what its setting can move (a ranking's, or a packet's)
CHOSEN_BY = {"focus": "nDCG@10", "facets": "nDCG@10", "sittings": "coverage", "held": "coverage"}
GRIDS: dict[str, list[dict]] = {
    "focus": [{"gather_focus": v} for v in (0.5, 1.0, 3.0)],
    "facets": [{"gather_facets": v} for v in (0.5, 1.0)],
    "sittings": [{"gather_sittings": 1}],
    "held": [{"gather_held": 1}],
}


def classes(conv) -> dict[str, dict[str, str]]:
    """qid -> {"shape": the rule's, "gold": gathering when its evidence is in two or more
    sittings, "category": the benchmark's}, for the judged questions of one store."""
    sitting = conv.sessions()
    out = {}
    for q in conv.questions:
        if q.evidence:
            sittings = {sitting.get(t) for t in q.evidence}
            out[q.qid] = {"shape": shape_of(q.text).kind, "gold": "gathering" if len(sittings) > 1 else "pinpoint",
                          "category": q.category}
    return out


def objective(scores: dict, point: str, train: dict[str, list[str]], of: dict, measure: str = "nDCG@10") -> tuple:
    """The mean over kinds of GATHERING_WEIGHT x the gathering shape's `measure` (turn
    nDCG@10, or packet coverage for a setting of the packet) plus the rest x the pinpoint
    shape's; a tie kept by `default`, then by name."""
    per = []
    for kind, qids in train.items():
        parts = []
        for shape, weight in (("gathering", GATHERING_WEIGHT), ("pinpoint", 1 - GATHERING_WEIGHT)):
            got = [scores[point][kind][measure][q] for q in qids if of[kind][q]["shape"] == shape]
            if got:
                parts.append(weight * float(np.mean(got)))
        per.append(sum(parts))
    return float(np.mean(per)), point == BASE, point


def filled(scores: dict, point: str, kind: str) -> dict:
    """A point's figures on every question: its own where it ran, `default`'s elsewhere."""
    base = scores[BASE][kind]
    return {m: {**base[m], **scores[point][kind][m]} for m in base}


def rows_by_class(got: dict, was: dict, of: dict) -> dict:
    """class -> measure -> the held-out mean (and "<measure> p" against `default`)."""
    groups: dict[str, list[str]] = {"every question": sorted(got["nDCG@10"])}
    for q in sorted(of):
        c = of[q]
        for name in (f"shape {c['shape']}", f"gold {c['gold']}", f"category {c['category']}"):
            groups.setdefault(name, []).append(q)
    out = {}
    for name, qids in groups.items():
        row = {"questions": len(qids)}
        for m in (*MEASURES, *PACKET):
            a = np.array([got[m][q] for q in qids])
            b = np.array([was[m][q] for q in qids])
            row[m] = float(a.mean())
            row[f"{m} p"] = randomization_p(a, b) if not np.array_equal(a, b) else 1.0
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(GRIDS), help=f"grids chosen by the folds: {', '.join(GRIDS)}")
    parser.add_argument("--check", type=int, default=10,
                        help="pinpoint questions a kind run under every point to check they are unchanged")
    args = kind_arguments(parser, argv)
    from garden.pipelines import make_pipeline

    out = Path(args.out)
    saved, rows = saved_rows(out, "gathering_rows.json", args.reuse)
    scores = rows["scores"]
    variants = [v for v in args.variants.split(",") if v]
    points = [(f"{v}@{json.dumps(p, sort_keys=True)}", p) for v in variants for p in GRIDS[v]]
    pipeline = make_pipeline(BASE)
    with tempfile.TemporaryDirectory() as scratch:
        data = load_kinds(args.locomo, args.longmemeval, Path(scratch))
    of: dict[str, dict] = {}
    for kind, convs in data.items():
        of[kind] = {q: c for conv in convs for q, c in classes(conv).items()}
        rows["folds"][kind] = folds_of("longmemeval" if kind == "longmemeval" else "locomo", convs)
        depth = DEPTH["longmemeval" if kind == "longmemeval" else "locomo"]
        if kind not in scores.setdefault(BASE, {}):
            scores[BASE][kind] = measured(BASE, pipeline, convs, depth, {})
        gathering = {q for q, c in of[kind].items() if c["shape"] == "gathering"}
        checked = set(sorted(q for q in of[kind] if q not in gathering)[:args.check])
        for label, point in points:
            if kind in scores.setdefault(label, {}):
                continue
            got = measured(label, pipeline, convs, depth, point, only=gathering | checked)
            for m, per in got.items():
                changed = [q for q in checked if abs(per[q] - scores[BASE][kind][m][q]) > 1e-9]
                if changed:
                    raise SystemExit(f"{kind} under {label}: the pinpoint question {changed[0]} changed {m}")
                for q in checked:
                    per.pop(q)
            scores[label][kind] = got
            print(f"{kind} under {label} measured ({len(gathering)} gathering questions)", flush=True)
            out.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(rows))
        if args.negatives:
            ask_negatives(rows, kind, convs, args.negatives,
                          [(label, pipeline, point) for label, point in [(BASE, {}), *points]],
                          lambda: saved.write_text(json.dumps(rows)))
    report: dict = {"held_out": {}, "chosen": {}, "negatives answered": {}, "agreement": agreement(of)}
    for variant in variants:
        names = [BASE] + [label for label, _ in points if label.startswith(f"{variant}@")]
        full = {n: {k: filled(scores, n, k) for k in data} for n in names}
        picked, held = hold_out_questions(
            rows["folds"], lambda train: max(names, key=lambda n: objective(full, n, train, of, CHOSEN_BY[variant])))
        report["chosen"][variant] = dict(picked)
        for kind, per in held.items():
            got = {m: {q: full[per[q]][kind][m][q] for q in per} for m in (*MEASURES, *PACKET)}
            report["held_out"].setdefault(kind, {BASE: rows_by_class(full[BASE][kind], full[BASE][kind], of[kind])})
            report["held_out"][kind][variant] = rows_by_class(got, full[BASE][kind], of[kind])
    for label, per in rows.get("negatives", {}).items():
        report["negatives answered"][label] = {k: float(np.mean(list(v.values()))) for k, v in per.items() if v}
    show(report)
    write_json(out / "gathering.json", report)
    return 0


def agreement(of: dict) -> dict:
    """Per kind: how the shape rule agrees with the gold class (read from the judgments)."""
    out = {}
    for kind, per in of.items():
        both = sum(1 for c in per.values() if c["shape"] == c["gold"] == "gathering")
        gold = sum(1 for c in per.values() if c["gold"] == "gathering")
        rule = sum(1 for c in per.values() if c["shape"] == "gathering")
        out[kind] = {"gold gathering": gold, "rule gathering": rule, "both": both,
                     "gold read as gathering": both / gold if gold else None,
                     "rule's gathering that is gold": both / rule if rule else None}
    return out


def show(report: dict) -> None:
    for kind, per in report["held_out"].items():
        print(f"\n{kind}")
        for variant, classes_ in per.items():
            for name, row in classes_.items():
                if name.startswith("category") and variant != BASE:
                    continue
                print(f"  {variant:<9}{name:<24}{row['questions']:>5}" + "".join(
                    f"{row[m]:>7.3f}{'*' if row.get(f'{m} p', 1) < 0.05 else ' '}" for m in (*MEASURES, *PACKET)))
    for variant, per in report["chosen"].items():
        print(f"\n{variant}: the point each fold was scored by")
        for fold, point in per.items():
            print(f"  {fold}: {point}")
    print("\nagreement", json.dumps(report["agreement"], indent=1))
    if report["negatives answered"]:
        print("negatives answered", json.dumps(report["negatives answered"], indent=1))


if __name__ == "__main__":
    sys.exit(main())
