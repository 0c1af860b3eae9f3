"""Metrics against ir-measures, run files, significance tests and the compare report."""
import json

import ir_measures
import numpy as np
import pytest
from rich.console import Console

from garden.formats.corpora import Collection
from garden.evaluation.compare import (
    compare_collection,
    compare_runs,
    evaluate,
    holm,
    plot_per_query,
    randomization_p,
    rankings,
    run_collection,
    significance,
    ttest_p,
    win_tie_loss,
    write_trec_run,
)
from garden.errors import GardenError
from garden.retrievers import Doc, make_retriever, rank

QRELS = {
    "1": {"a": 1, "b": 0, "c": 2},
    "2": {"d": 1},
    "3": {"a": 1, "e": 1},
}
RUN_X = {
    "1": [("c", 3.0), ("a", 2.0), ("b", 1.0)],
    "2": [("a", 5.0), ("d", 4.0)],
    "3": [("e", 1.0), ("b", 0.5), ("a", 0.25)],
}
RUN_Y = {
    "1": [("b", 3.0), ("a", 2.0)],
    "2": [("d", 1.0)],
    "3": [("c", 1.0)],
}
MEASURES = ("AP", "nDCG@10", "R@1000", "RR", "P@10")


def as_dict(run):
    return {q: {d: s for d, s in ranking} for q, ranking in run.items()}


def test_metrics_equal_ir_measures_computed_directly():
    evaluation = evaluate(QRELS, {"x": RUN_X, "y": RUN_Y}, MEASURES)
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    for name, run in (("x", RUN_X), ("y", RUN_Y)):
        direct = ir_measures.calc_aggregate(measures, QRELS, as_dict(run))
        for measure in measures:
            assert evaluation.aggregates[name][str(measure)] == pytest.approx(direct[measure], abs=1e-12)
        for metric in ir_measures.iter_calc(measures, QRELS, as_dict(run)):
            assert evaluation.per_query[name][str(metric.measure)][metric.query_id] == pytest.approx(metric.value)
    assert evaluation.qids == ["1", "2", "3"]
    assert evaluation.measures == list(MEASURES)


def test_a_query_without_results_counts_as_zero():
    partial = {"1": RUN_X["1"], "2": []}  # 2 retrieved nothing, 3 is absent
    evaluation = evaluate(QRELS, {"x": partial}, ["AP"])
    full = ir_measures.calc_aggregate([ir_measures.AP], {"1": QRELS["1"]}, as_dict({"1": RUN_X["1"]}))
    assert evaluation.per_query["x"]["AP"] == {"1": pytest.approx(full[ir_measures.AP]), "2": 0.0, "3": 0.0}
    assert evaluation.aggregates["x"]["AP"] == pytest.approx(full[ir_measures.AP] / 3)


def test_recall_at_small_cutoffs_for_small_stories():
    evaluation = evaluate(QRELS, {"x": RUN_X}, ["R@1", "R@2"])
    assert evaluation.per_query["x"]["R@1"] == {"1": 0.5, "2": 0.0, "3": 0.5}
    assert evaluation.per_query["x"]["R@2"] == {"1": 1.0, "2": 1.0, "3": 0.5}


def test_an_unknown_metric_is_a_garden_error():
    with pytest.raises(GardenError, match="unknown metric 'MAPX'"):
        evaluate(QRELS, {"x": RUN_X}, ["AP", "MAPX"])


# --- significance --------------------------------------------------------------------


def test_identical_runs_are_not_different():
    evaluation = evaluate(QRELS, {"x": RUN_X, "same": RUN_X}, MEASURES)
    tests = significance(evaluation, "x")
    assert set(tests) == {"same"}
    for test in tests["same"].values():
        assert test.p_randomization == 1.0
        assert test.p_ttest == 1.0
        assert test.delta == 0.0
        assert (test.wins, test.ties, test.losses) == (0, 3, 0)
        assert not test.significant


def test_a_run_better_on_every_query_is_significant():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.1, 0.5, size=30)
    better = base + rng.uniform(0.05, 0.2, size=30)
    assert randomization_p(better, base) < 0.001
    assert ttest_p(better, base) < 0.001
    assert win_tie_loss(better, base) == (30, 0, 0)


def test_randomization_test_is_deterministic_and_symmetric():
    a = np.array([0.1, 0.5, 0.3, 0.9, 0.2, 0.4])
    b = np.array([0.2, 0.4, 0.3, 0.5, 0.1, 0.6])
    assert randomization_p(a, b) == randomization_p(a, b)
    assert randomization_p(a, b) == pytest.approx(randomization_p(b, a))
    # with six queries there are only 2**6 sign patterns: p cannot be tiny
    assert 0.05 < randomization_p(a, b) <= 1.0


def test_ttest_agrees_with_scipy_when_defined():
    from scipy.stats import ttest_rel

    a, b = np.array([0.1, 0.5, 0.3, 0.9]), np.array([0.2, 0.4, 0.1, 0.5])
    assert ttest_p(a, b) == pytest.approx(ttest_rel(a, b).pvalue)
    assert ttest_p(a + 1, a) == 0.0  # a constant nonzero difference: t is infinite


def test_holm_by_hand():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted: a 0.01 * 3, c 0.03 * 2, b 0.04 * 1 raised to keep the order monotone
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.6, "b": 0.9}) == {"a": 1.0, "b": 1.0}


def test_holm_only_when_several_pipelines_face_the_baseline():
    two = significance(evaluate(QRELS, {"x": RUN_X, "y": RUN_Y}, ["AP"]), "x")
    assert two["y"]["AP"].p_adjusted == two["y"]["AP"].p_randomization
    three = significance(evaluate(QRELS, {"x": RUN_X, "y": RUN_Y, "z": RUN_X}, ["AP"]), "x")
    raw = {p: three[p]["AP"].p_randomization for p in ("y", "z")}
    assert {p: three[p]["AP"].p_adjusted for p in ("y", "z")} == pytest.approx(holm(raw))


def test_a_baseline_that_did_not_run_is_refused():
    with pytest.raises(GardenError, match="baseline 'nope'"):
        compare_runs(QRELS, {"x": RUN_X}, baseline="nope")


# --- run files -----------------------------------------------------------------------


def test_trec_run_round_trips_through_ir_measures(tmp_path):
    run = {"10": [("b", 1.0), ("a", 1.0), ("c", 0.3333333333333333)],
           "9": [("z", -2.5), ("y", 7.25e-05)]}
    path = write_trec_run(tmp_path / "out" / "x.run", run, "garden-x")
    read = list(ir_measures.read_trec_run(str(path)))
    assert [(r.query_id, r.doc_id, r.score) for r in read] == [
        ("9", "y", 7.25e-05), ("9", "z", -2.5),  # numeric qids in numeric order
        ("10", "a", 1.0), ("10", "b", 1.0), ("10", "c", 0.3333333333333333),  # ties by docno
    ]
    lines = path.read_text().splitlines()
    assert lines[2] == "10 Q0 a 1 1.0 garden-x"
    assert [line.split()[3] for line in lines] == ["1", "2", "1", "2", "3"]
    assert {(r.query_id, r.doc_id): r.score for r in read} == {
        (q, d): s for q, ranking in run.items() for d, s in ranking}


def test_a_run_tag_must_be_one_word(tmp_path):
    with pytest.raises(GardenError, match="one word"):
        write_trec_run(tmp_path / "x.run", RUN_X, "two words")


# --- runs over a collection ----------------------------------------------------------

TINY = Collection(
    "tiny",
    [Doc("d1", "walrus lantern cave"), Doc("d2", "chocolate cake recipe"), Doc("d3", "stock market crash"),
     Doc("d4", "lantern festival lights"), Doc("d5", "cake walk")],
    {"q1": "lantern", "q2": "chocolate cake", "q3": "market"},
    {"q1": {"d1": 1, "d4": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}},
)


def test_rankings_go_through_the_fastest_method_and_agree():
    slow, fast = make_retriever("bm25"), make_retriever("bm25s")
    slow.index(TINY.docs)
    fast.index(TINY.docs)
    queries = list(TINY.queries.values())
    assert rankings(slow, queries, 10) == [rank(slow.score(q), 10) for q in queries]
    def ids(lists):
        return [[d for d, _ in r] for r in lists]

    assert ids(rankings(fast, queries, 10)) == ids(rankings(slow, queries, 10))


def test_run_collection_ranks_every_query_with_every_pipeline():
    runs = run_collection(TINY, ["bm25", "bm25s", "tfidf"], depth=1)
    assert set(runs.rankings) == {"bm25", "bm25s", "tfidf"}
    for run in runs.rankings.values():
        assert {q: [d for d, _ in r] for q, r in run.items()} == {"q1": ["d1"], "q2": ["d2"], "q3": ["d3"]}
    assert set(runs.queries_per_s) == set(runs.rankings)
    assert all(isinstance(v, float) for v in runs.queries_per_s.values())


def test_run_collection_refuses_a_pipeline_named_twice():
    with pytest.raises(GardenError, match="twice"):
        run_collection(TINY, ["bm25", "bm25"])


def write_tiny_trec(root):
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "docs.trec").write_text(
        "".join(f"<DOC>\n<DOCNO>{d.id}</DOCNO>\n{d.text}\n</DOC>\n" for d in TINY.docs))
    (root / "query-text.trec").write_text(
        "".join(f"<top>\n<num>{q}</num><title>\n{t.upper()}\n</title>\n</top>\n" for q, t in TINY.queries.items()))
    (root / "qrels").write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, rels in TINY.qrels.items() for d, r in rels.items()))
    return root


def test_compare_collection_report_shape_files_and_table(tmp_path):
    root = write_tiny_trec(tmp_path / "tiny")
    report = compare_collection(root, ["bm25", "bm25s", "tfidf"], baseline="bm25",
                                trec_dir=tmp_path / "runs", plot=tmp_path / "plot.png", permutations=500)
    shape = json.loads(report.dumps())
    assert shape["baseline"] == "bm25"
    assert set(shape["pipelines"]) == {"bm25", "bm25s", "tfidf"}
    for values in shape["pipelines"].values():
        assert {"AP", "nDCG@10", "RR", "R@1000", "P@10", "queries_per_s"} <= set(values)
    assert shape["pipelines"]["bm25"]["AP"] == pytest.approx(1.0)
    assert shape["tests"]["correction"] == "holm"
    assert set(shape["tests"]["vs_baseline"]) == {"bm25s", "tfidf"}
    assert shape["tests"]["vs_baseline"]["bm25s"]["AP"]["p_randomization"] == 1.0
    for name in ("bm25", "bm25s", "tfidf"):
        assert (tmp_path / "runs" / f"{name}.run").read_text().startswith("q1 Q0 ")
    # the qrels beside the runs, so trec_eval or ranx score them without the collection
    qrels = (tmp_path / "runs" / "qrels").read_text().splitlines()
    assert sorted(qrels) == sorted(f"{q} 0 {d} {r}" for q, rels in TINY.qrels.items() for d, r in rels.items())
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = Console(record=True, width=160)
    console.print(report.table())
    text = console.export_text()
    assert "bm25s" in text and "tfidf" in text and "0/3/0" in text


def test_compare_collection_checks_its_arguments_before_running(tmp_path):
    root = write_tiny_trec(tmp_path / "tiny")
    with pytest.raises(GardenError, match="baseline 'dense'"):
        compare_collection(root, ["bm25"], baseline="dense")
    with pytest.raises(GardenError, match="unknown metric"):
        compare_collection(root, ["bm25"], measures=["AP", "Nonsense@3"])
    with pytest.raises(GardenError, match="unknown retriever"):
        compare_collection(root, ["bm25", "no-such-thing"])


def test_plot_refuses_a_metric_it_was_not_given(tmp_path):
    evaluation = evaluate(QRELS, {"x": RUN_X, "y": RUN_Y}, ["AP"])
    with pytest.raises(GardenError, match="'RR' was not computed"):
        plot_per_query(tmp_path / "p.png", evaluation.per_query, "x", "RR")
    path = plot_per_query(tmp_path / "p.png", evaluation.per_query, "x", "AP")
    assert path.stat().st_size > 1000


def test_a_run_file_refuses_ids_with_spaces(tmp_path):
    with pytest.raises(GardenError, match="spaces"):
        write_trec_run(tmp_path / "x.run", {"1": [("two words", 1.0)]}, "tag")


def test_the_paired_t_test_is_scipys_within_1e_10():
    """The t-test is computed without scipy.stats (a second to import); scipy is the
    reference, over seeded samples of every size and spread."""
    from scipy.stats import ttest_rel

    from garden.evaluation.measures import ttest_p

    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 10, 30, 100, 1000):
        for _ in range(100):
            a = rng.random(n)
            b = a + rng.normal(0, rng.choice([1e-3, 0.01, 0.1, 1.0]), n) + rng.choice([0.0, 0.01, 0.5])
            assert ttest_p(a, b) == pytest.approx(float(ttest_rel(a, b).pvalue), abs=1e-10, rel=0)


def test_kendalls_tau_b_is_scipys_exactly_ties_included():
    from scipy.stats import kendalltau

    from garden.evaluation.replay import kendall_tau_b, rank_correlation

    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(2, 15))
        x, y = rng.integers(0, 6, n).tolist(), rng.integers(0, 6, n).tolist()
        expected = kendalltau(x, y).statistic
        got = kendall_tau_b(x, y)
        assert (got is None and expected != expected) or got == expected, (x, y)
    assert rank_correlation(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert rank_correlation(["a"], ["b"]) == -1.0 and rank_correlation(["a"], ["a"]) is None
