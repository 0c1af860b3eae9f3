"""`garden tune`: choose a stage's setting the way the project chooses every one of its own.

The protocol (Hastie, Tibshirani and Friedman, "The Elements of Statistical Learning",
7.10: cross-validation; here, leave one fold out):

1. **Folds over the source's stores.** A source of several stores, each asking its own
   questions (LoCoMo's conversations, an imported store set), is one fold a store; a
   source with a store a question (LongMemEval's haystacks) deals its questions, sorted
   by category and then id, into `GROUPS` groups in turn, so every group holds every
   category.
2. **The grid.** Every combination of the values given (`--grid NAME=V1,V2`, repeatable),
   each a variant of the pipeline by name (`default:gather_focus=0.5`,
   garden/pipelines/variants.py, checked as any name is); the pipeline as it is is a
   point too.
3. **Choose on the others, score the held-out.** For each fold, the point with the best
   mean of the chosen measure (turn nDCG@10 by default) over the other folds' questions,
   a tie kept by the pipeline as it is, then by name; the fold's questions are scored by
   that point. The held-out figures together are the honest ones: each question is
   scored by a choice its fold did not see.
4. **Against the pipeline as it is**: each held-out figure beside the pipeline's own, with
   the paired randomization test's p (10,000 worlds), for every question and per
   question shape (garden/rerank/shape.py).

A question is judged by its evidence turns (garden/evaluation/stores.py's turn ranking, to
the kind's depth); a question without one is left out, since no ranking measure is
defined for it. The runs are the pipeline's own rankings; nothing is judged by a
pipeline's own output.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from garden.errors import GardenError
from garden.evaluation.stores import Conversation

MEASURES = ("nDCG@10", "R@10", "Success@5")
GROUPS = 7          # LongMemEval's questions are dealt into this many folds


@dataclass
class TuneReport:
    """What `tune` found: each fold's choice, the held-out figures against the pipeline
    as it is (every question and per shape), and the chosen measure."""

    source: str
    pipeline: str
    measure: str
    points: list[str]
    chosen: dict[str, str]                          # fold -> the point it was scored by
    held_out: dict[str, dict[str, dict]]            # class -> measure -> {held_out, pipeline, p}
    questions: dict[str, int]                       # class -> questions
    folds: dict[str, int] = field(default_factory=dict)   # fold -> its questions

    def to_json(self) -> dict:
        return {"source": self.source, "pipeline": self.pipeline, "measure": self.measure, "points": self.points,
                "folds": self.folds, "chosen": self.chosen, "questions": self.questions,
                "held_out": self.held_out,
                "judgments": "the source's evidence turns (turn ranking, ir-measures)"}

    def show(self) -> None:
        from garden._terminal import echo

        echo(self.lines())

    def lines(self) -> list[str]:
        """The report as it reads at 80 columns."""
        out = [self.source, f"{self.pipeline} tuned by {self.measure}: {len(self.folds)} folds, "
               f"{len(self.points)} points", "", "the point each fold was scored by:"]
        out += [f"  {fold} ({self.folds[fold]} q): {point}" for fold, point in self.chosen.items()]
        out += ["", f"held out against {self.pipeline} as it is (p: paired randomization):"]
        for name, per in self.held_out.items():
            out.append(f"  {name} ({self.questions[name]} q)")
            for m, row in per.items():
                out.append(f"    {m:<10} {row['held_out']:.4f} against {row['pipeline']:.4f} "
                           f"({row['held_out'] - row['pipeline']:+.4f}, p {row['p']:.4f})")
        return out


def parse_grid(grid: Sequence[str]) -> dict[str, list[str]]:
    """`NAME=V1,V2,...` (each given once) -> name -> its values as written."""
    out: dict[str, list[str]] = {}
    for item in grid:
        name, sep, values = item.partition("=")
        points = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name.strip() or not points:
            raise GardenError(f"--grid {item!r}: write NAME=V1,V2,... (a stage's setting and its values)")
        if name.strip() in out:
            raise GardenError(f"--grid: setting {name.strip()} is given twice")
        out[name.strip()] = points
    if not out:
        raise GardenError("--grid: give at least one NAME=V1,V2,...")
    return out


def variant(pipeline: str, settings: dict[str, str]) -> str:
    """The pipeline's name with `settings` written into it, before any `@`."""
    base, at, retriever = pipeline.partition("@")
    return base + "".join(f":{k}={v}" for k, v in settings.items()) + (at + retriever)


def points_of(pipeline: str, grid: dict[str, list[str]]) -> list[str]:
    """The pipeline as it is, then every combination of the grid, each name checked."""
    from garden.pipelines import check_pipeline

    names = [pipeline] + [variant(pipeline, dict(zip(grid, values)))
                          for values in itertools.product(*grid.values())]
    for name in names:
        check_pipeline(name)
    return list(dict.fromkeys(names))


def stores_of(source: str | Path) -> tuple[int, list[Conversation]]:
    """(the depth its rankings are judged to, its stores with their judged questions), as
    the source's kind loads them (garden/evaluation/kinds/); a kind without stores of its
    own questions (cases, a trace, a collection) refused in one line naming it."""
    from garden.evaluation.kinds.registry import kind_of

    kind = kind_of(source)
    if kind.stores is None:
        raise GardenError(f"{source}: tune chooses over stores that ask their own judged questions (LoCoMo or "
                          f"LongMemEval, a file or its import); the {kind.name} kind has none")
    judged = [Conversation(c.story, [q for q in c.questions if q.evidence]) for c in kind.stores(Path(source))]
    judged = [c for c in judged if c.questions]
    if not judged:
        raise GardenError(f"{source}: no question names an evidence turn: nothing to tune on")
    return kind.depth, judged


def folds_of(stores: Sequence[Conversation]) -> dict[str, str]:
    """qid -> its fold: a store a fold, or, when every store asks one question, the
    questions dealt into GROUPS groups by category, then id (see the module docstring)."""
    questions = [(c, q) for c in stores for q in c.questions]
    if all(len(c.questions) == 1 for c in stores):
        ordered = sorted((q for _, q in questions), key=lambda q: (q.category, q.qid))
        return {q.qid: f"group-{n % GROUPS + 1}" for n, q in enumerate(ordered)}
    return {q.qid: c.story.name for c, q in questions}


def per_question(pipeline_name: str, stores: Sequence[Conversation], depth: int,
                 measures: Sequence[str] = MEASURES) -> dict[str, dict[str, float]]:
    """measure -> qid -> value: the pipeline's turn ranking of each judged question."""
    from garden.evaluation.measures import evaluate
    from garden.evaluation.stores import as_run, prepare, rank_both, turn_ranking
    from garden.pipelines import make_pipeline

    pipeline = make_pipeline(pipeline_name)
    runs, qrels = {}, {}
    for conv in stores:
        prepare(pipeline, conv.story)
        for q, (ranking, _) in zip(conv.questions, rank_both(pipeline, conv, depth, conv.questions,
                                                             with_sittings=False)):
            runs[q.qid] = as_run(turn_ranking(conv.story, ranking, depth))
            qrels[q.qid] = {t: 1 for t in q.evidence}
    ev = evaluate(qrels, {"run": runs}, list(measures))
    return {m: {q: ev.per_query["run"][m].get(q, 0.0) for q in qrels} for m in measures}


def choose_held_out(scores: dict[str, dict[str, dict[str, float]]], folds: dict[str, str], base: str,
                    measure: str) -> dict[str, str]:
    """fold -> the point with the best mean `measure` over the other folds' questions, a
    tie kept by `base` (the pipeline as it is), then by name."""
    out = {}
    for held in sorted(set(folds.values())):
        train = [q for q, f in folds.items() if f != held]

        def objective(point: str) -> tuple:
            return float(np.mean([scores[point][measure][q] for q in train])), point == base, point

        out[held] = max(scores, key=objective)
    return out


def tune(source: str | Path, pipeline: str, grid: Sequence[str], measure: str = "nDCG@10",
         out: str | Path | None = None) -> TuneReport:
    """The protocol of the module docstring on `source` for `pipeline` over `grid`; the
    report, also written as JSON to `out` when given."""
    from garden.evaluation.measures import randomization_p
    from garden.rerank.shape import shape_of

    if measure not in MEASURES:
        raise GardenError(f"--measure {measure!r}: choose one of {', '.join(MEASURES)}")
    points = points_of(pipeline, parse_grid(grid))
    depth, stores = stores_of(source)
    folds = folds_of(stores)
    if len(set(folds.values())) < 2:
        raise GardenError(f"{source}: one fold only; tune needs two stores or more to hold one out")
    scores = {p: per_question(p, stores, depth) for p in points}
    chosen = choose_held_out(scores, folds, pipeline, measure)
    texts = {q.qid: q.text for c in stores for q in c.questions}
    classes = {"every question": sorted(folds)}
    for qid in sorted(folds):
        classes.setdefault(f"shape {shape_of(texts[qid]).kind}", []).append(qid)
    held_out = {}
    for name, qids in classes.items():
        held_out[name] = {}
        for m in MEASURES:
            got = np.array([scores[chosen[folds[q]]][m][q] for q in qids])
            was = np.array([scores[pipeline][m][q] for q in qids])
            held_out[name][m] = {"held_out": float(got.mean()), "pipeline": float(was.mean()),
                                 "p": 1.0 if np.array_equal(got, was) else randomization_p(got, was)}
    report = TuneReport(str(source), pipeline, measure, points, chosen, held_out,
                        {name: len(q) for name, q in classes.items()},
                        {f: sum(1 for v in folds.values() if v == f) for f in sorted(set(folds.values()))})
    if out is not None:
        Path(out).write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return report
