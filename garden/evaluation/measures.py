"""Measuring: effectiveness and its significance, apart from where the runs come from
and how a comparison is shown.

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

import math

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError
from garden.text import is_number

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
    """Two-sided paired t-test (Student 1908), as scipy.stats.ttest_rel computes it: t is
    the mean difference over its standard error, and p the two tails of Student's t with
    n - 1 degrees of freedom. With no spread in the differences the t statistic is
    undefined: p is 1 when they are all zero and 0 when they all agree on a nonzero value.
    Computed here (scipy.stats costs a command's start a second to import);
    tests/test_compare.py holds it to scipy's within 1e-12."""
    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diffs.size < 2 or np.allclose(diffs, diffs[0], rtol=0, atol=1e-12):
        return 1.0 if diffs.size == 0 or abs(diffs[0]) <= 1e-12 else 0.0
    n = diffs.size
    t = float(diffs.mean() / math.sqrt(diffs.var(ddof=1) / n))
    return student_t_two_sided(t, n - 1)


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom: the regularized
    incomplete beta I_x(df/2, 1/2) at x = df / (df + t^2) (Abramowitz & Stegun 26.7.1)."""
    if math.isinf(t):
        return 0.0
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction
    (Press et al., Numerical Recipes, 3rd ed., section 6.4), on the side where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The incomplete beta's continued fraction, by the modified Lentz method."""
    tiny, eps = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


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


def natural_key(qid: str):
    """Numeric ids in numeric order, the rest after them in text order."""
    return (0, int(qid), "") if is_number(qid) else (1, 0, qid)
