"""LongMemEval (a released .json or .json.gz file, or `garden import longmemeval`
output): each question's haystack a store, judged by its evidence turns, scored by the
authors' measures too when asked (garden/evaluation/longmemeval.py)."""
from __future__ import annotations

from garden.evaluation.kinds.kind import Kind, Options
from garden.evaluation.longmemeval import DEPTH, compare_longmemeval, stores_of_source

OWN_NEGATIVES = "it brings its own negatives, the abstention questions"


def compare(path, pipelines, baseline, plot=None, metrics=None, trec_dir=None, scoring=None, against=None):
    return compare_longmemeval(path, pipelines, baseline, scoring=scoring or "garden", plot=plot, against=against,
                               metrics=metrics, trec_dir=trec_dir)


KIND = Kind("longmemeval", "LongMemEval", compare, stores=stores_of_source, depth=DEPTH, options=(
    Options(("scoring",), "is LongMemEval's own scoring, of a LongMemEval file or its import"),
    Options(("against",), "sets the published figures beside a LongMemEval comparison"),
), declines=dict.fromkeys(("negatives", "negatives_per_store", "negatives_seed"), OWN_NEGATIVES))
