"""The garden's reciprocal rank fusion and paired randomization test against ranx's
(Bassani, ECIR 2022, "ranx: A Blazing-Fast Python Library for Ranking Evaluation and
Comparison"), on the same runs: the Vaswani collection ranked by bm25s, tfidf and a variant
of each, pairs whose p-values span the range (measured with 5,000 sign flips: about 0.0002,
0.07, 0.16, 0.32 and 0.85)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from garden.evaluation.compare import evaluate, run_collection
from garden.evaluation.measures import randomization_p
from garden.formats.corpora import load_collection
from garden.retrievers.hybrid import rrf

ranx = pytest.importorskip("ranx", reason="ranx is not installed (pip install -e '.[test]')")
VASWANI = Path(__file__).resolve().parents[2] / "shared" / "data" / "vaswani"
DEPTH = 1000
PERMUTATIONS = 20_000
TUNED_BM25, SUBLINEAR = "bm25s:k1=0.9:b=0.4", "tfidf:sublinear_tf=true"
RUNS = ("bm25s", "tfidf", TUNED_BM25, SUBLINEAR)
PAIRS = [("AP", "bm25s", "tfidf"), ("RR", "tfidf", SUBLINEAR), ("nDCG@10", "tfidf", SUBLINEAR),
         ("AP", "bm25s", TUNED_BM25), ("AP", "tfidf", SUBLINEAR)]

pytestmark = pytest.mark.skipif(not (VASWANI / "corpus").is_dir(),
                                reason=f"the Vaswani collection is not at {VASWANI}")


@pytest.fixture(scope="module")
def vaswani():
    return load_collection(VASWANI)


@pytest.fixture(scope="module")
def runs(vaswani, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GARDEN_HOME", str(tmp_path_factory.mktemp("home")))
        return run_collection(vaswani, RUNS, depth=DEPTH).rankings


def _as_ranx(ranking: list[tuple[str, float]]) -> dict[str, float]:
    """A ranking as ranx reads one: strictly decreasing scores in the garden's order, so both
    fuse the same ranks (the garden breaks a tie by id, ranx by what its sort meets first:
    what is compared is the fusion, not the tie rule)."""
    return {doc: float(len(ranking) - position) for position, (doc, _) in enumerate(ranking)}


def test_reciprocal_rank_fusion_is_ranx_s(runs):
    from ranx import Run, fuse

    members = ("bm25s", "tfidf")
    theirs = fuse(runs=[Run({qid: _as_ranx(r) for qid, r in runs[m].items()}) for m in members],
                  method="rrf", params={"k": 60}).to_dict()
    for qid in runs["bm25s"]:
        ours = rrf([runs[m][qid] for m in members], k=60.0)
        assert set(ours) == set(theirs[qid]), qid
        # the same sums of 1 / (60 + rank), added in another order: float rounding at most
        assert max(abs(ours[doc] - theirs[qid][doc]) for doc in ours) <= 1e-12, qid


@pytest.mark.parametrize("measure, first, second", PAIRS)
def test_the_paired_randomization_test_agrees_with_ranx_s(vaswani, runs, measure, first, second):
    from ranx.statistical_tests.fisher_randomization_test import fisher_randomization_test

    pair = (first, second)
    evaluation = evaluate(vaswani.qrels, {name: runs[name] for name in pair}, (measure,))
    a, b = (evaluation.values(name, measure) for name in pair)
    assert not np.array_equal(a, b)
    ours = randomization_p(a, b, PERMUTATIONS, seed=0)
    theirs, _ = fisher_randomization_test(a, b, PERMUTATIONS, 0.05, 0)
    # Both draw, for each of n worlds, whether each query's two values swap (a sign flip of
    # its difference) and count the worlds at least as extreme: two Monte Carlo estimates of
    # one p, each with standard deviation sqrt(p (1 - p) / n). Their difference is held to
    # four standard deviations of a difference of two (a chance of about 6e-5 of failing by
    # luck), plus the garden's +1 in numerator and denominator (a p is never 0 there).
    spread = math.sqrt(2 * ours * (1 - ours) / PERMUTATIONS)
    assert abs(ours - float(theirs)) <= 4 * spread + 2 / PERMUTATIONS, (pair, ours, theirs)
    assert np.isfinite([ours, theirs]).all()
