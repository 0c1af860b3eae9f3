"""The report of `garden compare` on a collection: runs (runs.py) evaluated and tested
against a baseline (measures.py), shown by show.py. The names of those modules are
re-exported here, where callers have always found them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError
from garden.evaluation.measures import (  # noqa: F401
    ALPHA, DEFAULT_MEASURES, PERMUTATIONS, SEED, TIE, WARM_UP, Evaluation, PairedTest, Qrels, Ranking, Run,
    evaluate, holm, natural_key, parse_measures, randomization_p, significance, ttest_p, win_tie_loss,
)
from garden.evaluation.runs import (STRUCTURED_WARM_UP, Runs, rankings, run_collection, write_trec_files,  # noqa: F401
                                    write_trec_run)
from garden.evaluation.show import plot_per_query  # noqa: F401
from garden.formats.corpora import Collection, load_collection


# --- report --------------------------------------------------------------------------


@dataclass
class CompareReport:
    collection: str
    baseline: str
    evaluation: Evaluation
    tests: dict[str, dict[str, PairedTest]]
    queries_per_s: dict[str, float] = field(default_factory=dict)
    alpha: float = ALPHA
    permutations: int = PERMUTATIONS
    rankings: dict[str, Run] = field(default_factory=dict)  # what was evaluated, for side-by-side views
    queries: dict[str, str] = field(default_factory=dict)   # qid -> query text, when known

    @property
    def measures(self) -> list[str]:
        return self.evaluation.measures

    @property
    def correction(self) -> str:
        return "holm" if len(self.tests) > 1 else "none"

    def to_json(self) -> dict:
        pipelines = {}
        for name, values in self.evaluation.aggregates.items():
            pipelines[name] = dict(values)
            if name in self.queries_per_s:
                pipelines[name]["queries_per_s"] = self.queries_per_s[name]
        return {
            "collection": self.collection,
            "queries": len(self.evaluation.qids),
            "measures": self.measures,
            "pipelines": pipelines,
            "baseline": self.baseline,
            "tests": {
                "method": "paired randomization (sign flip), two-sided; paired t-test beside it",
                "permutations": self.permutations,
                "seed": SEED,
                "alpha": self.alpha,
                "correction": self.correction,
                "vs_baseline": {p: {m: t.to_json() for m, t in by_metric.items()}
                                for p, by_metric in self.tests.items()},
            },
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def table(self):
        """A rich Table: one row per pipeline, a mark on each significant difference
        (drawn by show.py)."""
        from garden.evaluation.show import compare_table

        return compare_table(self)


def summary_block(report: CompareReport) -> dict:
    """What a report that holds several comparisons keeps of each: its questions, means and
    tests."""
    j = report.to_json()
    return {"queries": j["queries"], "pipelines": j["pipelines"], "tests": j["tests"]}


def compare_runs(qrels: Qrels, runs: Mapping[str, Run], baseline: str | None = None,
                 measures: Sequence[str] = DEFAULT_MEASURES, queries_per_s: Mapping[str, float] | None = None,
                 name: str = "runs", permutations: int = PERMUTATIONS, alpha: float = ALPHA) -> CompareReport:
    """Evaluate `runs` and test each against `baseline` (the first run when None)."""
    if not runs:
        raise GardenError("no pipeline to compare")
    baseline = baseline if baseline is not None else next(iter(runs))
    if baseline not in runs:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(runs)}")
    evaluation = evaluate(qrels, runs, measures)
    tests = significance(evaluation, baseline, permutations=permutations, alpha=alpha)
    return CompareReport(name, baseline, evaluation, tests, dict(queries_per_s or {}), alpha, permutations)


def compare_values(per_query: Mapping[str, Mapping[str, Mapping[str, float]]], measures: Sequence[str],
                   baseline: str, name: str = "runs", permutations: int = PERMUTATIONS,
                   alpha: float = ALPHA) -> CompareReport:
    """A report over measures computed elsewhere (pipeline -> measure -> qid -> value, every
    pipeline valued on the same questions): means, and each pipeline's paired test against
    `baseline` with Holm's correction, as for measures ir-measures computes."""
    if baseline not in per_query:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(per_query)}")
    qids = sorted(per_query[baseline][measures[0]], key=natural_key)
    if not qids:
        raise GardenError(f"{name}: no question to evaluate")
    table = {p: {m: {q: float(per_query[p][m][q]) for q in qids} for m in measures} for p in per_query}
    aggregates = {p: {m: float(np.mean(list(v[m].values()))) for m in measures} for p, v in table.items()}
    evaluation = Evaluation(list(measures), qids, table, aggregates)
    tests = significance(evaluation, baseline, permutations=permutations, alpha=alpha)
    return CompareReport(name, baseline, evaluation, tests, {}, alpha, permutations)


def compare_collection(path: str | Path, pipelines: Sequence[str], baseline: str | None = None,
                       measures: Sequence[str] = DEFAULT_MEASURES, depth: int = 1000,
                       trec_dir: str | Path | None = None, plot: str | Path | None = None,
                       permutations: int = PERMUTATIONS) -> CompareReport:
    """Everything `garden compare` does short of printing: load, run, evaluate, test,
    and optionally write each run as `<trec_dir>/<pipeline>.run` (the qrels beside them as
    `<trec_dir>/qrels`) and a per-query plot of the first metric."""
    _check_comparison(pipelines, baseline, measures)  # a bad name fails before minutes of indexing
    return _compared(load_collection(path), str(path), pipelines, baseline, measures, depth, trec_dir, plot,
                     permutations)


def compare_loaded(collection: Collection, pipelines: Sequence[str], baseline: str | None = None,
                   measures: Sequence[str] = DEFAULT_MEASURES, depth: int = 1000,
                   trec_dir: str | Path | None = None, plot: str | Path | None = None,
                   permutations: int = PERMUTATIONS) -> CompareReport:
    """`compare_collection` on a collection already read: a kind whose files are not TREC
    or BEIR reads them into a `Collection` and is compared from here the same way."""
    _check_comparison(pipelines, baseline, measures)
    return _compared(collection, collection.name, pipelines, baseline, measures, depth, trec_dir, plot,
                     permutations)


def _check_comparison(pipelines: Sequence[str], baseline: str | None, measures: Sequence[str]) -> None:
    if not pipelines:
        raise GardenError("no pipeline to compare")
    if baseline is not None and baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")
    parse_measures(measures)


def _compared(collection: Collection, where: str, pipelines: Sequence[str], baseline: str | None,
              measures: Sequence[str], depth: int, trec_dir, plot, permutations: int) -> CompareReport:
    judged = {qid: rels for qid, rels in collection.qrels.items() if qid in collection.queries}
    if not judged:
        raise GardenError(f"{where}: no query has judgments in the qrels")
    runs = run_collection(collection, pipelines, depth)
    report = compare_runs(judged, runs.rankings, baseline, measures, runs.queries_per_s,
                          collection.name, permutations)
    report.rankings, report.queries = runs.rankings, dict(collection.queries)
    if trec_dir is not None:
        write_trec_files(trec_dir, runs.rankings, judged)
    if plot is not None:
        plot_per_query(plot, report.evaluation.per_query, report.baseline, report.measures[0])
    return report
