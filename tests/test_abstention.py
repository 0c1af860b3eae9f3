"""Tests of garden.evaluation.abstention: query-performance predictors, AUROC and risk-coverage."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from garden.evaluation.abstention import (PREDICTORS, auroc, nqc, operating_point, plot_risk_coverage,
                                          risk_coverage, score_gap, top_score, wig)

PROPERTIES = settings(max_examples=200, deadline=None, derandomize=True, database=None)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# small integers make ties common, within and across the two sides
tied_scores = st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=30)
any_scores = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30)


# --- predictors ----------------------------------------------------------------------------


RANKED = [4.0, 3.0, 2.0, 1.0]  # mean 2.5


def test_top_score_is_the_first_score_or_zero():
    assert top_score(RANKED) == 4.0
    assert top_score([-2.0, -5.0]) == -2.0
    assert top_score([]) == 0.0


def test_score_gap_against_the_kth_or_the_last_score():
    assert score_gap([9.0, 8.0, 7.0, 6.0, 5.0, 1.0], k=5) == 4.0
    assert score_gap([5.0, 3.0], k=5) == 2.0  # fewer than k: minus the last
    assert score_gap([7.0], k=5) == 0.0
    assert score_gap([], k=5) == 0.0


def test_nqc_by_hand():
    # top 2 = [4, 3]: mu 3.5, population deviation 0.5; reference = mean of the list, 2.5
    assert nqc(RANKED, k=2) == pytest.approx(0.5 / 2.5, abs=1e-15)
    # k beyond the list: all four, variance 1.25
    assert nqc(RANKED, k=10) == pytest.approx(math.sqrt(1.25) / 2.5, abs=1e-15)
    # an explicit reference is taken by its absolute value
    assert nqc(RANKED, k=2, reference=-10.0) == pytest.approx(0.05, abs=1e-15)
    assert nqc(RANKED, k=2, reference=5.0) == pytest.approx(0.1, abs=1e-15)


def test_nqc_zero_when_empty_or_reference_zero():
    assert nqc([]) == 0.0
    assert nqc(RANKED, k=2, reference=0.0) == 0.0
    assert nqc([1.0, -1.0], k=2) == 0.0  # the list's mean, the default reference, is 0


def test_wig_by_hand():
    # ((4 - 2.5) + (3 - 2.5)) / 2 / sqrt(4)
    assert wig(RANKED, k=2, query_terms=4) == pytest.approx(0.5, abs=1e-15)
    # explicit reference 1: ((4 - 1) + (3 - 1)) / 2 / sqrt(4)
    assert wig(RANKED, k=2, query_terms=4, reference=1.0) == pytest.approx(1.25, abs=1e-15)
    assert wig(RANKED, k=2, query_terms=1, reference=1.0) == pytest.approx(2.5, abs=1e-15)
    assert wig([], k=5) == 0.0


def test_wig_floors_query_terms_at_one():
    assert wig(RANKED, k=2, query_terms=0) == wig(RANKED, k=2, query_terms=1) == pytest.approx(1.0)


def test_wig_with_fewer_than_k_scores_averages_over_those_there_are():
    assert wig([4.0, 2.0], k=5, reference=1.0) == pytest.approx(2.0)


def test_predictors_table_matches_the_functions():
    scores, terms = [9.0, 7.5, 7.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.2, 0.1, 0.0, -1.0], 3
    assert set(PREDICTORS) == {"top", "gap@5", "nqc@10", "wig@5"}
    assert PREDICTORS["top"](scores, terms) == top_score(scores)
    assert PREDICTORS["gap@5"](scores, terms) == score_gap(scores, k=5) == 9.0 - 2.0
    assert PREDICTORS["nqc@10"](scores, terms) == nqc(scores, k=10)
    assert PREDICTORS["wig@5"](scores, terms) == wig(scores, k=5, query_terms=3)
    assert all(f([], terms) == 0.0 for f in PREDICTORS.values())


@pytest.mark.parametrize("bad", [[3.0, 1.0, 2.0], [1.0, float("nan")], [float("inf"), 1.0]])
def test_predictors_refuse_unsorted_or_non_finite_lists(bad):
    for predictor in PREDICTORS.values():
        with pytest.raises(ValueError):
            predictor(bad, 1)


def test_k_must_be_positive():
    with pytest.raises(ValueError, match="k must be"):
        nqc(RANKED, k=0)
    with pytest.raises(ValueError, match="k must be"):
        score_gap(RANKED, k=-1)


# --- AUROC ---------------------------------------------------------------------------------


def sklearn_auroc(positives, negatives) -> float:
    labels = [1] * len(positives) + [0] * len(negatives)
    return roc_auc_score(labels, list(positives) + list(negatives))


@PROPERTIES
@given(positives=tied_scores, negatives=tied_scores)
def test_auroc_matches_sklearn_with_ties(positives, negatives):
    assert abs(auroc(positives, negatives) - sklearn_auroc(positives, negatives)) <= 1e-12


@PROPERTIES
@given(positives=any_scores, negatives=any_scores)
def test_auroc_matches_sklearn_on_floats(positives, negatives):
    assert abs(auroc(positives, negatives) - sklearn_auroc(positives, negatives)) <= 1e-12


def test_auroc_matches_sklearn_on_large_seeded_samples():
    rng = np.random.default_rng(7)
    positives = np.round(rng.normal(0.5, 1.0, 3000), 1)  # rounding makes many ties
    negatives = np.round(rng.normal(0.0, 1.0, 2000), 1)
    assert abs(auroc(positives, negatives) - sklearn_auroc(positives, negatives)) <= 1e-12


def test_auroc_perfect_reversed_tied_and_empty():
    assert auroc([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert auroc([1.0, 2.0], [3.0, 4.0]) == 0.0
    assert auroc([1.0, 1.0], [1.0]) == 0.5
    assert auroc([], [1.0]) is None
    assert auroc([1.0], []) is None


@pytest.mark.parametrize("side", ["positives", "negatives"])
def test_auroc_refuses_nan_and_names_it(side):
    arguments = {"positives": [1.0, 2.0], "negatives": [0.0, 0.5]}
    arguments[side] = [0.3, float("nan")]
    with pytest.raises(ValueError, match=rf"{side}\[1\] is NaN"):
        auroc(**arguments)


def test_auroc_accepts_infinities_as_extreme_values():
    inf = float("inf")
    assert auroc([inf, 5.0], [4.0, -inf]) == 1.0
    assert auroc([inf], [inf]) == 0.5
    assert auroc([-inf], [0.0]) == 0.0


@PROPERTIES
@given(positives=st.lists(st.sampled_from([-math.inf, -1.0, 0.0, 1.0, math.inf]), min_size=1, max_size=20),
       negatives=st.lists(st.sampled_from([-math.inf, -1.0, 0.0, 1.0, math.inf]), min_size=1, max_size=20))
def test_auroc_treats_infinity_as_a_value_beyond_every_finite_one(positives, negatives):
    def finite(values):  # the same order with the infinities replaced by finite extremes
        return [10.0 if v == math.inf else -10.0 if v == -math.inf else v for v in values]
    expected = sklearn_auroc(finite(positives), finite(negatives))
    assert abs(auroc(positives, negatives) - expected) <= 1e-12


# --- risk-coverage -------------------------------------------------------------------------


def test_risk_coverage_by_hand():
    scores = [0.8, 0.1, 0.9, 0.8]
    losses = [1.0, 1.0, 0.0, 0.0]
    assert risk_coverage(scores, losses) == [
        (0.9, 0.25, 0.0),          # answers the 0.9 only
        (0.8, 0.75, 1.0 / 3.0),    # both 0.8s come in together: a tie is one threshold
        (0.1, 1.0, 0.5),
    ]


def test_risk_coverage_empty_and_bad_input():
    assert risk_coverage([], []) == []
    with pytest.raises(ValueError, match="losses"):
        risk_coverage([1.0, 2.0], [0.0])
    with pytest.raises(ValueError, match="a loss lies in"):
        risk_coverage([1.0], [1.5])
    with pytest.raises(ValueError, match="NaN"):
        risk_coverage([float("nan")], [0.0])


questions = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-4, 4).map(float), min_size=n, max_size=n),
    st.lists(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)), min_size=n, max_size=n)))


@PROPERTIES
@given(questions)
def test_risk_coverage_curve_properties(data):
    scores, losses = data
    curve = risk_coverage(scores, losses)
    thresholds = [t for t, _, _ in curve]
    coverages = [c for _, c, _ in curve]
    assert thresholds == sorted(set(scores), reverse=True)  # one point per distinct score
    assert all(a < b for a, b in zip(coverages, coverages[1:]))
    assert coverages[-1] == 1.0
    assert curve[-1][2] == pytest.approx(float(np.mean(losses)), abs=1e-12)
    assert all(0.0 <= r <= 1.0 for _, _, r in curve)


@PROPERTIES
@given(questions)
def test_operating_point_agrees_with_the_curve_at_each_threshold(data):
    scores, losses = data
    for threshold, coverage, risk in risk_coverage(scores, losses):
        answered = [s >= threshold for s in scores]
        got_coverage, got_risk = operating_point(answered, losses)
        assert got_coverage == pytest.approx(coverage, abs=1e-12)
        assert got_risk == pytest.approx(risk, abs=1e-12)


def test_operating_point_by_hand():
    assert operating_point([True, False, True, False], [1.0, 1.0, 0.0, 0.0]) == (0.5, 0.5)
    assert operating_point([0, 1], [0.2, 0.4]) == (0.5, 0.4)
    assert operating_point([False, False], [1.0, 0.0]) == (0.0, 0.0)
    assert operating_point([], []) == (0.0, 0.0)


def test_operating_point_refuses_bad_input():
    with pytest.raises(ValueError, match="booleans"):
        operating_point([0.7, 0.2], [0.0, 1.0])
    with pytest.raises(ValueError, match="losses"):
        operating_point([True], [0.0, 1.0])


# --- plot ----------------------------------------------------------------------------------


def test_plot_writes_a_deterministic_png(tmp_path):
    scores = [0.9, 0.8, 0.8, 0.5, 0.3, 0.1]
    losses = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    curves = {"nqc@10": risk_coverage(scores, losses), "top": risk_coverage(scores[::-1], losses)}
    points = {"gate at 0.5": operating_point([s >= 0.5 for s in scores], losses), "answer all": (1.0, 0.5)}

    first = plot_risk_coverage(curves, points, tmp_path / "a" / "b" / "rc.png", title="test")
    second = plot_risk_coverage(curves, points, tmp_path / "again.png", title="test")

    assert first == tmp_path / "a" / "b" / "rc.png"
    data = first.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    assert data == second.read_bytes()
    assert b"Software" not in data  # no version string to make bytes differ between installs
    assert sorted(p.name for p in first.parent.iterdir()) == ["rc.png"]  # no temporary file left


def test_plot_replaces_an_existing_file_and_draws_differently_for_other_inputs(tmp_path):
    target = tmp_path / "rc.png"
    target.write_bytes(b"old")
    plot_risk_coverage({"a": [(1.0, 0.5, 0.2), (0.0, 1.0, 0.4)]}, {}, target)
    one = target.read_bytes()
    plot_risk_coverage({"a": [(1.0, 0.5, 0.6), (0.0, 1.0, 0.4)]}, {}, target)
    assert one.startswith(PNG_SIGNATURE) and one != target.read_bytes()
