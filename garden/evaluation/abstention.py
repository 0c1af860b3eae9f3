"""Selective answering: should a retrieval system answer a question at all?

Three parts. Query-performance predictors turn one ranked list of retrieval scores into
one number that should be higher when the question is answerable (`top_score`,
`score_gap`, `nqc`, `wig`, and `PREDICTORS` to compute them all). `auroc` measures how
well such a number separates answerable from unanswerable questions. Risk-coverage
(`risk_coverage`, `operating_point`, `plot_risk_coverage`) shows what a gate that answers
only above a threshold trades: the share of questions answered against the mean loss on
those it answers.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

Point = tuple[float, float, float]  # (threshold, coverage, risk)


# --- query-performance predictors --------------------------------------------------------


def _ranked(scores: Sequence[float]) -> np.ndarray:
    """`scores` as a 1-D float array; ValueError unless finite and sorted best first,
    since every predictor reads the top of the list as the best documents."""
    ranked = np.asarray(scores, dtype=float).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(ranked))
    if bad.size:
        raise ValueError(f"scores[{bad[0]}] is {ranked[bad[0]]}: retrieval scores must be finite")
    rising = np.flatnonzero(np.diff(ranked) > 0)
    if rising.size:
        i = rising[0]
        raise ValueError(f"scores are not sorted best first: scores[{i}]={ranked[i]} < scores[{i + 1}]={ranked[i + 1]}")
    return ranked


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a whole number of at least 1, got {k!r}")


def _reference(ranked: np.ndarray, reference: float | None) -> float:
    """The score a list is measured against: the caller's, or else the list's own mean."""
    if reference is None:
        return float(ranked.mean())
    if not math.isfinite(reference):
        raise ValueError(f"reference must be finite, got {reference!r}")
    return float(reference)


def top_score(scores: Sequence[float]) -> float:
    """s_1, the score of the best document; 0.0 for an empty list."""
    ranked = _ranked(scores)
    return float(ranked[0]) if ranked.size else 0.0


def score_gap(scores: Sequence[float], k: int = 5) -> float:
    """s_1 - s_k: how far the best document stands above the k-th (above the last one
    when fewer than k were retrieved); 0.0 for an empty list."""
    _check_k(k)
    ranked = _ranked(scores)
    return float(ranked[0] - ranked[:k][-1]) if ranked.size else 0.0


def nqc(scores: Sequence[float], k: int = 10, reference: float | None = None) -> float:
    """Normalized Query Commitment, sqrt((1/k) * sum_{i<=k} (s_i - mu)^2) / |reference|,
    mu the mean of the top k scores (all of them when fewer than k).

    Shtok, Kurland, Carmel, Raiber & Markovits (2012), "Predicting query performance by
    query-drift estimation", ACM TOIS 30(2). The paper's reference is the score of the
    whole corpus taken as one document; when `reference` is None the mean score of the
    whole list given stands in for it, the query's background at the depth the caller
    retrieved. 0.0 for an empty list or a reference of 0.
    """
    _check_k(k)
    ranked = _ranked(scores)
    if not ranked.size:
        return 0.0
    background = _reference(ranked, reference)
    if background == 0.0:
        return 0.0
    top = ranked[:k]
    return float(np.sqrt(np.mean((top - top.mean()) ** 2)) / abs(background))


def wig(scores: Sequence[float], k: int = 5, query_terms: int = 1, reference: float | None = None) -> float:
    """Weighted Information Gain, (1/k) * sum_{i<=k} (s_i - reference) / sqrt(query_terms).

    Zhou & Croft (2007), "Query performance prediction in web search environments",
    SIGIR. `reference` as for `nqc` (the mean of the whole list when None). When fewer
    than k scores were retrieved the mean runs over those there are, so a short list is
    not pulled towards the reference. `query_terms` is floored at 1: a query whose terms
    the analyzer all dropped still counts as one. 0.0 for an empty list.
    """
    _check_k(k)
    ranked = _ranked(scores)
    if not ranked.size:
        return 0.0
    background = _reference(ranked, reference)
    return float(np.mean(ranked[:k] - background) / math.sqrt(max(1, query_terms)))


# name -> f(scores, query_terms). Depth is whatever list the caller passes: k counts from
# its top, and the default reference of nqc and wig is the mean of that whole list.
PREDICTORS: Mapping[str, Callable[[Sequence[float], int], float]] = {
    "top": lambda scores, query_terms: top_score(scores),
    "gap@5": lambda scores, query_terms: score_gap(scores, k=5),
    "nqc@10": lambda scores, query_terms: nqc(scores, k=10),
    "wig@5": lambda scores, query_terms: wig(scores, k=5, query_terms=query_terms),
}


# --- how well a predictor separates answerable from unanswerable -------------------------


def _no_nan(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    nan = np.flatnonzero(np.isnan(array))
    if nan.size:
        raise ValueError(f"{name}[{nan[0]}] is NaN: a score must be a number (infinities are allowed)")
    return array


def _auroc(positives: np.ndarray, negatives: np.ndarray) -> float:
    # Mann-Whitney U from mid-ranks: a tie between a positive and a negative adds 1/2.
    from scipy.stats import rankdata   # here: importing scipy.stats costs a command's start a second

    ranks = rankdata(np.concatenate([positives, negatives]), method="average")
    n_pos, n_neg = positives.size, negatives.size
    u = ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """Area under the ROC curve, P(s_pos > s_neg) + 0.5 * P(s_pos = s_neg), for a score
    meant to be higher on positives (answerable) than on negatives (unanswerable).

    Computed as the Mann-Whitney U statistic over (n_pos * n_neg) from mid-ranks, in
    O(n log n): Mann & Whitney (1947), Annals of Mathematical Statistics 18; its reading
    as the ROC area, Hanley & McNeil (1982), "The meaning and use of the area under a
    receiver operating characteristic (ROC) curve", Radiology 143. An infinite score is a legal,
    extreme value; NaN raises ValueError. None when either side is empty.
    """
    pos, neg = _no_nan(positives, "positives"), _no_nan(negatives, "negatives")
    if not pos.size or not neg.size:
        return None
    return _auroc(pos, neg)


# --- risk-coverage -----------------------------------------------------------------------


def _losses(losses: Sequence[float], n: int) -> np.ndarray:
    array = np.asarray(losses, dtype=float).reshape(-1)
    if array.size != n:
        raise ValueError(f"{n} questions but {array.size} losses")
    bad = np.flatnonzero(~((array >= 0.0) & (array <= 1.0)))  # also catches NaN
    if bad.size:
        raise ValueError(f"losses[{bad[0]}] is {array[bad[0]]}: a loss lies in [0, 1]")
    return array


def risk_coverage(scores: Sequence[float], losses: Sequence[float]) -> list[Point]:
    """(threshold, coverage, risk) for every distinct score t, answering every question
    with score >= t: coverage = |answered| / n, risk = sum(loss over answered) / |answered|.

    Geifman & El-Yaniv (2017), "Selective classification for deep neural networks",
    NeurIPS. Tied scores form one threshold, since no gate on the score can split them.
    Sorted by coverage ascending, so the last point answers everything (coverage 1, risk
    the mean loss). Every point answers at least one question; [] when there are none.
    """
    gate = _no_nan(scores, "scores")
    loss = _losses(losses, gate.size)
    if not gate.size:
        return []
    order = np.argsort(-gate, kind="stable")
    gate, loss = gate[order], loss[order]
    answered = np.arange(1, gate.size + 1)
    # the last question of each group of equal scores closes a threshold
    ends = np.flatnonzero(np.append(gate[1:] != gate[:-1], True))
    risk = np.cumsum(loss)[ends] / answered[ends]
    coverage = answered[ends] / gate.size
    return [(float(t), float(c), float(r)) for t, c, r in zip(gate[ends], coverage, risk)]


def operating_point(answered: Sequence[bool], losses: Sequence[float]) -> tuple[float, float]:
    """(coverage, risk) of one decision: coverage = |answered| / n, risk = mean loss over
    the answered questions (0.0 when none is answered, or there are no questions)."""
    decided = np.asarray(answered).reshape(-1)
    if decided.dtype != bool:
        if decided.size and not np.isin(decided, (0, 1)).all():
            raise ValueError("answered must hold booleans (True = the question is answered)")
        decided = decided.astype(bool)
    loss = _losses(losses, decided.size)
    count = int(decided.sum())
    if count == 0:
        return 0.0, 0.0
    return count / decided.size, float(loss[decided].mean())


def plot_risk_coverage(curves: Mapping[str, Sequence[Point]], points: Mapping[str, tuple[float, float]],
                       path: str | Path, title: str = "") -> Path:
    """One PNG: each curve of (threshold, coverage, risk) a line, each (coverage, risk)
    operating point a marker, labelled by name. The same inputs give the same bytes: a
    fixed size and dpi, and no software version in the metadata. Written whole or not at
    all (a temporary file in the same folder, then renamed over `path`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.8))
    FigureCanvasAgg(figure)  # the Agg canvas, without touching pyplot's global backend
    ax = figure.subplots()
    for name, curve in curves.items():
        coverage = [c for _, c, _ in curve]
        risk = [r for _, _, r in curve]
        ax.plot(coverage, risk, label=name, linewidth=1.5, clip_on=False)
    markers = "osD^vPX*"
    for i, (name, (coverage, risk)) in enumerate(points.items()):
        ax.plot([coverage], [risk], marker=markers[i % len(markers)], markersize=8, linestyle="none",
                label=name, clip_on=False, zorder=3)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("coverage (share of questions answered)")
    ax.set_ylabel("risk (mean loss over answered questions)")
    if title:
        ax.set_title(title)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    if curves or points:
        ax.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100, metadata={"Software": None})

    from garden.derived.home import write_whole

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, image.getvalue())
    return path
