"""The metric and statistics core of `garden compare`, apart from where the runs come from.

Effectiveness is measured with ir-measures (the trec_eval family of definitions). A query
that has judgments but no retrieved documents counts as zero, as ``trec_eval -c`` counts
it, so a pipeline cannot gain by returning nothing. Differences against a baseline are
tested per metric with a paired randomization (sign-flip) test, Smucker, Allan & Carterette
(2007), "A comparison of statistical significance tests for information retrieval
evaluation", beside a paired t-test; when several pipelines are compared with one baseline
the p-values of each metric are adjusted by Holm's step-down rule (Holm 1979), so the
chance of any false "significant" stays at alpha.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from garden.formats.corpora import Collection, load_collection
from garden.errors import GardenError
from garden.retrievers import Retriever, check_finite, make_retriever, rank

DEFAULT_MEASURES = ("AP", "nDCG@10", "R@1000", "RR", "P@10")
PERMUTATIONS = 10_000
SEED = 0
ALPHA = 0.05
WARM_UP = 64  # queries run untimed before a pipeline's timed run
TIE = 1e-9  # per-query differences this small are ties: float noise, not a win

Ranking = list[tuple[str, float]]  # (docid, score), best first
Run = dict[str, Ranking]  # qid -> ranking
Qrels = Mapping[str, Mapping[str, int]]


# --- metrics -------------------------------------------------------------------------


def parse_measures(names: Sequence[str]) -> dict[str, object]:
    """Measure name -> ir-measures measure, in the order given; GardenError on a bad name."""
    import ir_measures

    if isinstance(names, str):
        names = [names]
    parsed: dict[str, object] = {}
    for name in names:
        try:
            measure = ir_measures.parse_measure(name)
        except (NameError, ValueError, TypeError, SyntaxError) as exc:
            raise GardenError(f"unknown metric {name!r} ({exc}); try AP, nDCG@10, R@1000, RR, P@10") from None
        parsed[str(measure)] = measure
    if not parsed:
        raise GardenError("no metric to compute")
    return parsed


@dataclass
class Evaluation:
    measures: list[str]
    qids: list[str]  # the judged queries every value below is over
    per_query: dict[str, dict[str, dict[str, float]]]  # pipeline -> metric -> qid -> value
    aggregates: dict[str, dict[str, float]]  # pipeline -> metric -> mean over qids

    def values(self, pipeline: str, metric: str) -> np.ndarray:
        """Per-query values in `qids` order, for paired tests."""
        column = self.per_query[pipeline][metric]
        return np.array([column[q] for q in self.qids], dtype=np.float64)


def _run_dict(run: Run) -> dict[str, dict[str, float]]:
    return {qid: {doc: float(score) for doc, score in ranking} for qid, ranking in run.items()}


def evaluate(qrels: Qrels, runs: Mapping[str, Run], measures: Sequence[str] = DEFAULT_MEASURES) -> Evaluation:
    """Per-query values and means of `measures` for every run, over every judged query."""
    import ir_measures

    parsed = parse_measures(measures)
    qids = sorted(qrels, key=natural_key)
    if not qids:
        raise GardenError("the qrels judge no query: nothing to evaluate")
    judged = {qid: {doc: int(rel) for doc, rel in qrels[qid].items()} for qid in qids}
    by_measure = {measure: name for name, measure in parsed.items()}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    aggregates: dict[str, dict[str, float]] = {}
    for pipeline, run in runs.items():
        table = {name: dict.fromkeys(qids, 0.0) for name in parsed}
        scored = {qid: ranking for qid, ranking in _run_dict(run).items() if qid in judged and ranking}
        if scored:
            for metric in ir_measures.iter_calc(list(parsed.values()), judged, scored):
                if metric.query_id in judged:
                    table[by_measure[metric.measure]][metric.query_id] = float(metric.value)
        per_query[pipeline] = table
        aggregates[pipeline] = {name: float(np.mean(list(values.values()))) for name, values in table.items()}
    return Evaluation(list(parsed), qids, per_query, aggregates)


# --- significance --------------------------------------------------------------------


def randomization_p(a: np.ndarray, b: np.ndarray, permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """Two-sided paired randomization test of mean(a - b) = 0: each query's difference keeps
    or flips its sign at random; p is the share of such worlds whose |mean| is at least
    the observed one, counting the observed world itself (so p is never 0)."""
    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diffs.size == 0:
        return 1.0
    observed = abs(diffs.mean())
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(permutations, diffs.size))
    means = np.abs(signs @ diffs) / diffs.size
    # a tolerance so that sums of the same values in another order count as equal
    extreme = np.count_nonzero(means >= observed - 1e-12)
    return float((extreme + 1) / (permutations + 1))


def ttest_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test. With no spread in the differences the t statistic is
    undefined: p is 1 when they are all zero and 0 when they all agree on a nonzero value."""
    from scipy.stats import ttest_rel

    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diffs.size < 2 or np.allclose(diffs, diffs[0], rtol=0, atol=1e-12):
        return 1.0 if diffs.size == 0 or abs(diffs[0]) <= 1e-12 else 0.0
    return float(ttest_rel(a, b).pvalue)


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values: the i-th smallest of m is multiplied by m - i + 1,
    kept monotone and capped at 1."""
    ordered = sorted(pvalues.items(), key=lambda kv: (kv[1], kv[0]))
    m = len(ordered)
    adjusted: dict[str, float] = {}
    running = 0.0
    for i, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[name] = running
    return adjusted


@dataclass
class PairedTest:
    mean: float
    baseline_mean: float
    delta: float
    p_randomization: float
    p_ttest: float
    p_adjusted: float  # the randomization p after Holm's correction (itself when m = 1)
    wins: int
    ties: int
    losses: int
    significant: bool

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def win_tie_loss(a: np.ndarray, b: np.ndarray, tolerance: float = TIE) -> tuple[int, int, int]:
    diffs = np.asarray(a) - np.asarray(b)
    wins = int(np.count_nonzero(diffs > tolerance))
    losses = int(np.count_nonzero(diffs < -tolerance))
    return wins, diffs.size - wins - losses, losses


def significance(evaluation: Evaluation, baseline: str, permutations: int = PERMUTATIONS,
                 seed: int = SEED, alpha: float = ALPHA) -> dict[str, dict[str, PairedTest]]:
    """pipeline -> metric -> test against `baseline`, for every pipeline but the baseline."""
    if baseline not in evaluation.per_query:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(evaluation.per_query)}")
    if permutations < 1:
        raise GardenError(f"permutations must be at least 1, got {permutations}")
    others = [p for p in evaluation.per_query if p != baseline]
    tests: dict[str, dict[str, PairedTest]] = {p: {} for p in others}
    for metric in evaluation.measures:
        base = evaluation.values(baseline, metric)
        raw = {p: randomization_p(evaluation.values(p, metric), base, permutations, seed) for p in others}
        adjusted = holm(raw) if len(others) > 1 else raw
        for p in others:
            values = evaluation.values(p, metric)
            wins, ties, losses = win_tie_loss(values, base)
            tests[p][metric] = PairedTest(
                mean=float(values.mean()), baseline_mean=float(base.mean()),
                delta=float(values.mean() - base.mean()), p_randomization=raw[p],
                p_ttest=ttest_p(values, base), p_adjusted=adjusted[p],
                wins=wins, ties=ties, losses=losses, significant=adjusted[p] < alpha,
            )
    return tests


# --- runs ----------------------------------------------------------------------------


def natural_key(qid: str):
    """Numeric ids in numeric order, the rest after them in text order."""
    return (0, int(qid), "") if qid.isdigit() else (1, 0, qid)


def write_trec_run(path: str | Path, run: Run, tag: str) -> Path:
    """`qid Q0 docno rank score tag` lines; each ranking re-sorted by score, ties by docno,
    so the file is the same whatever order the run came in."""
    if not tag or any(c.isspace() for c in tag):
        raise GardenError(f"a run tag must be one word, got {tag!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for qid in sorted(run, key=natural_key):
        for position, (doc, score) in enumerate(sorted(run[qid], key=lambda ds: (-ds[1], ds[0])), 1):
            if not doc or any(c.isspace() for c in doc + qid):
                raise GardenError(f"{path}: query {qid!r}, document {doc!r}: a run file cannot hold an empty id "
                                  "or one with spaces")
            lines.append(f"{qid} Q0 {doc} {position} {float(score)!r} {tag}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def rankings(retriever: Retriever, queries: Sequence[str], depth: int) -> list[Ranking]:
    """Each query's top `depth`, ties by id, through the fastest method the retriever has:
    a ranked batch (`top_many`), a scored batch (`score_many`) or one query at a time."""
    top_many = getattr(retriever, "top_many", None)
    if callable(top_many):
        return top_many(list(queries), depth)
    score_many = getattr(retriever, "score_many", None)
    scored = score_many(list(queries)) if callable(score_many) else [retriever.score(q) for q in queries]
    return [rank(scores, depth) for scores in scored]


class Runs(NamedTuple):
    rankings: dict[str, Run]  # pipeline -> qid -> ranking
    queries_per_s: dict[str, float]  # pipeline -> queries scored and ranked per second
    index_s: dict[str, float]  # pipeline -> seconds to index the collection


def run_collection(collection: Collection, pipelines: Sequence[str], depth: int = 1000) -> Runs:
    """Rank every query of `collection` to `depth` under each named pipeline: a bare
    retriever indexes the documents and ranks them; a structured pipeline (`default`,
    `default-phrase`, ...) ranks the collection as a story of source records (see
    garden/pipelines/ranking.py), every structured pipeline of one call sharing the story
    and its indexes. Structured names are checked before anything is indexed. Timings are
    wall-clock figures for a report, never inputs to a result."""
    from garden.pipelines import check_pipeline, split_structured

    if depth < 1:
        raise GardenError(f"depth must be at least 1, got {depth}")
    if len(set(pipelines)) != len(pipelines):
        raise GardenError(f"a pipeline is named twice in {', '.join(pipelines)}")
    for name in pipelines:
        if split_structured(name) is not None:
            check_pipeline(name)
    qids = list(collection.queries)
    texts = [collection.queries[q] for q in qids]
    runs: dict[str, Run] = {}
    speed: dict[str, float] = {}
    index_s: dict[str, float] = {}
    structured = _StructuredRuns(collection)
    for name in pipelines:
        if split_structured(name) is not None:
            ranked, index_s[name], elapsed = structured.run(name, texts, depth)
        else:
            retriever = make_retriever(name)
            start = time.perf_counter()
            retriever.index(collection.docs)
            index_s[name] = time.perf_counter() - start
            # An untimed warm-up batch: first-call costs (a model's first forward passes at a
            # full batch shape, cold caches) are paid once per process, not per query.
            rankings(retriever, texts[:WARM_UP], depth)
            start = time.perf_counter()
            ranked = rankings(retriever, texts, depth)
            elapsed = time.perf_counter() - start
        for qid, ranking in zip(qids, ranked):  # the same refusal every pipeline's scores meet
            check_finite(f"{name} (query {qid})", dict(ranking))
        runs[name] = dict(zip(qids, ranked))
        speed[name] = len(qids) / elapsed if elapsed > 0 else None  # too fast to time: no figure
    return Runs(runs, speed, index_s)


STRUCTURED_WARM_UP = 2  # structured queries run one at a time: a couple pay the first-call costs


class _StructuredRuns:
    """The structured pipelines of one `run_collection` call: the collection's story is
    built once, and its indexes live in a cache of their own, shared by these pipelines
    (`default` and `default-phrase` index once) and dropped with the run rather than kept
    for the process."""

    def __init__(self, collection: Collection):
        from garden.derived.indexes import IndexCache

        self.collection = collection
        self.indexes = IndexCache(bound=8)
        self.story = None

    def run(self, name: str, texts: Sequence[str], depth: int) -> tuple[list[Ranking], float, float]:
        """(each query's ranking, seconds to build the story and indexes, seconds to rank)."""
        from garden.pipelines import STRUCTURED, split_structured
        from garden.pipelines.ranking import collection_story, prepare, rank_texts
        from garden.pipelines.structured import StructuredPipeline

        base, without = split_structured(name)
        pipeline = StructuredPipeline(name, STRUCTURED[base], without, indexes=self.indexes)
        start = time.perf_counter()
        if self.story is None:
            self.story = collection_story(self.collection.name, self.collection.docs)
        prepare(pipeline, self.story.story)
        index_s = time.perf_counter() - start
        rank_texts(pipeline, self.story, texts[:STRUCTURED_WARM_UP], depth)
        start = time.perf_counter()
        ranked = rank_texts(pipeline, self.story, texts, depth)
        return ranked, index_s, time.perf_counter() - start


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
        """A rich Table: one row per pipeline, a mark on each significant difference."""
        from rich.table import Table

        table = Table(title=f"{self.collection}: {len(self.evaluation.qids)} queries, baseline {self.baseline}")
        table.add_column("pipeline")
        for metric in self.measures:
            table.add_column(metric, justify="right")
        first = self.measures[0]
        table.add_column(f"W/T/L {first}", justify="right")
        table.add_column("queries/s", justify="right")
        for name, values in self.evaluation.aggregates.items():
            cells = []
            for metric in self.measures:
                test = self.tests.get(name, {}).get(metric)
                mark = ""
                if test is not None and test.significant:
                    mark = " ▲" if test.delta > 0 else " ▼"
                cells.append(f"{values[metric]:.4f}{mark}")
            test = self.tests.get(name, {}).get(first)
            wtl = f"{test.wins}/{test.ties}/{test.losses}" if test else "baseline"
            speed = self.queries_per_s.get(name)
            cells += [wtl, f"{speed:,.0f}" if speed is not None else "-"]
            table.add_row(name, *cells)
        correction = ", Holm-adjusted" if self.correction == "holm" else ""
        table.caption = f"▲/▼ p < {self.alpha} vs {self.baseline} (paired randomization{correction})"
        return table


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
    and optionally write each run as `<trec_dir>/<pipeline>.run` and a per-query plot of
    the first metric."""
    if not pipelines:
        raise GardenError("no pipeline to compare")
    if baseline is not None and baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")
    parse_measures(measures)  # a bad metric name fails before minutes of indexing
    collection = load_collection(path)
    judged = {qid: rels for qid, rels in collection.qrels.items() if qid in collection.queries}
    if not judged:
        raise GardenError(f"{path}: no query has judgments in the qrels")
    runs = run_collection(collection, pipelines, depth)
    report = compare_runs(judged, runs.rankings, baseline, measures, runs.queries_per_s,
                          collection.name, permutations)
    report.rankings, report.queries = runs.rankings, dict(collection.queries)
    if trec_dir is not None:
        for name, run in runs.rankings.items():
            write_trec_run(Path(trec_dir) / f"{name}.run", run, name)
    if plot is not None:
        plot_per_query(plot, report.evaluation.per_query, report.baseline, report.measures[0])
    return report


# --- plot ----------------------------------------------------------------------------


def plot_per_query(path: str | Path, per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
                   baseline: str, metric: str) -> Path:
    """A PNG with one panel per pipeline: its per-query `metric` minus the baseline's,
    sorted from largest gain to largest loss. `per_query` is pipeline -> metric -> qid ->
    value, as in `Evaluation.per_query`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if baseline not in per_query:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(per_query)}")
    if metric not in per_query[baseline]:
        raise GardenError(f"metric {metric!r} was not computed; have {', '.join(per_query[baseline])}")
    others = [p for p in per_query if p != baseline]
    base = per_query[baseline][metric]
    qids = sorted(base, key=natural_key)
    figure = Figure(figsize=(8, 2.4 * max(1, len(others)) + 0.6))
    FigureCanvasAgg(figure)
    axes = figure.subplots(max(1, len(others)), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, others or [baseline]):
        diffs = np.sort([per_query[name][metric][q] - base[q] for q in qids])[::-1]
        wins, _, losses = win_tie_loss(diffs, np.zeros_like(diffs))
        colors = ["tab:green" if d > TIE else "tab:red" if d < -TIE else "tab:gray" for d in diffs]
        ax.bar(range(len(diffs)), diffs, color=colors, width=1.0)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(f"{name} - {baseline}: {metric} per query ({wins} better, {losses} worse)", fontsize=9)
        ax.set_ylabel(f"Δ {metric}")
        ax.set_xticks([])
    axes[-1].set_xlabel("queries, sorted by difference")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path
