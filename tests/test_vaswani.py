"""The real collection: all 93 Vaswani queries, top 1000, against the reference figures.

The first run embeds the 11,429 abstracts (a minute or three on two cores) into the
embedding cache under GARDEN_HOME, or the project's .garden/ when it is unset; later runs
read them back and encode nothing.
"""
import os
from pathlib import Path

import pytest

from garden.formats.corpora import load_collection
from garden.evaluation.compare import evaluate, run_collection
from garden.retrievers import make_retriever

PROJECT = Path(__file__).resolve().parents[1]
VASWANI = PROJECT.parent / "shared" / "data" / "vaswani"
MEASURES = ("AP", "nDCG@10", "R@1000", "RR")
PIPELINES = ("bm25", "bm25s", "dense", "hybrid")

pytestmark = pytest.mark.skipif(
    not (VASWANI / "corpus").is_dir(), reason=f"the Vaswani collection is not at {VASWANI}")


@pytest.fixture(scope="module")
def home():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GARDEN_HOME", os.environ.get("GARDEN_HOME") or str(PROJECT / ".garden"))
        yield


@pytest.fixture(scope="module")
def vaswani():
    return load_collection(VASWANI)


@pytest.fixture(scope="module")
def figures(home, vaswani):
    runs = run_collection(vaswani, PIPELINES, depth=1000)
    return evaluate(vaswani.qrels, runs.rankings, MEASURES).aggregates


def test_the_collection_loads_whole(vaswani):
    assert len(vaswani.docs) == 11429
    assert len(vaswani.queries) == 93
    assert sum(len(rels) for rels in vaswani.qrels.values()) == 2083
    assert vaswani.queries["1"] == "measurement of dielectric constant of liquids by the use of microwave techniques"


def test_bm25(figures):
    assert figures["bm25"]["AP"] >= 0.275
    assert figures["bm25"]["AP"] == pytest.approx(0.2803, abs=0.002)


def test_bm25s_matches_the_reference_bm25s_figures(figures):
    assert figures["bm25s"]["AP"] == pytest.approx(0.2803, abs=0.001)
    assert figures["bm25s"]["nDCG@10"] == pytest.approx(0.4280, abs=0.002)
    assert figures["bm25s"]["R@1000"] == pytest.approx(0.9266, abs=0.002)
    assert figures["bm25s"]["RR"] == pytest.approx(0.6881, abs=0.002)


def test_dense(figures):
    assert figures["dense"]["AP"] >= 0.275
    assert figures["dense"]["R@1000"] == pytest.approx(0.9425, abs=0.005)


def test_hybrid_beats_both_members(figures):
    assert figures["hybrid"]["AP"] >= 0.325
    assert figures["hybrid"]["AP"] > max(figures["bm25"]["AP"], figures["dense"]["AP"])
    assert figures["hybrid"]["nDCG@10"] > max(figures["bm25"]["nDCG@10"], figures["dense"]["nDCG@10"])


def test_a_second_dense_index_encodes_nothing(figures, home, vaswani):
    # `figures` has indexed the corpus (and cached it) at least once already
    retriever = make_retriever("dense")
    retriever.index(vaswani.docs)
    assert retriever.encoded == 0
    assert retriever.matrix.shape == (11429, 384)
