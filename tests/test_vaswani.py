"""The real collection: all 93 Vaswani queries, top 1000, against the reference figures.

The first run embeds the 11,429 abstracts (a minute or three on two cores) into the user's
embedding cache (GARDEN_CACHE, else the platform's cache folder), one module of the run at a
time (tests/encoded_once.py); later runs, in any checkout, read them back and encode nothing.
`default` shares that one run (the collection's story, a second bm25 index and the phrase
index, then about a quarter of a second a query), cold or warm: it reads the embeddings the
dense run has just cached. `default-phrase` runs on 12 queries only, enough to show a
stage-removed variant ranks a collection as hybrid does.
"""
import dataclasses
import importlib.util
import os
from pathlib import Path

import pytest

from garden.pipelines.indexes import IndexCache
from garden.errors import GardenError
from garden.formats.corpora import Collection, load_collection
from garden.evaluation.compare import evaluate, run_collection
from garden.pipelines.ranking import COLLECTION_AS_OF, Ranked, collection_story
from garden.pipelines.structured import StructuredPipeline
from garden.retrievers import Doc, make_retriever
from encoded_once import encode_once
from rankings import assert_same_ranking

PROJECT = Path(__file__).resolve().parents[1]
VASWANI = PROJECT.parent / "shared" / "data" / "vaswani"
MEASURES = ("AP", "nDCG@10", "R@1000", "RR")
PIPELINES = ("bm25", "bm25s", "dense", "hybrid", "default")
SUBSET = 12  # queries a stage-removed variant runs on: enough to show it ranks as hybrid does
# `dense` (int8, the default) moves between processors: AP 0.2788 where ONNX Runtime runs AVX2
# kernels, 0.27850 with AVX-512 and VNNI; 20 simulated processors (experiments/encoder_spread.py,
# the vector differences measured between the two kinds) moved AP by at most 0.0017 and R@1000
# by 0.0006. Held to the middle of the two measured figures, a little past the spread
# (docs/encoding.md, "Between machines")
DENSE_AP, DENSE_AP_SPREAD = 0.2787, 0.002
DENSE_R1000, DENSE_R1000_SPREAD = 0.9385, 0.002

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
def runs(home, vaswani, tmp_path_factory):
    """The one run of the collection every figure below is read from, its vectors encoded
    once in the run (tests/encoded_once.py: the Milvus standalone's module needs them too)."""
    encode_once(tmp_path_factory, "vaswani", vaswani.docs, list(vaswani.queries.values()))
    return run_collection(vaswani, PIPELINES, depth=1000)


@pytest.fixture(scope="module")
def figures(runs, vaswani):
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
    assert figures["dense"]["AP"] == pytest.approx(DENSE_AP, abs=DENSE_AP_SPREAD)
    assert figures["dense"]["R@1000"] == pytest.approx(DENSE_R1000, abs=DENSE_R1000_SPREAD)


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


# --- the same collection on Milvus (docs/milvus.md, "Figures: Vaswani") ------------------

MILVUS_MISSING = [m for m in ("pymilvus", "milvus_lite") if importlib.util.find_spec(m) is None]
# where Milvus runs: the embedded store under the garden home, and the server CI starts
# (GARDEN_MILVUS_SERVER); without one, that half is skipped
MILVUS_PLACES = ["embedded", "server"]
# milvus-bm25 indexes the garden's own terms (bm25's stopwords and stems), so it scores as
# bm25 does: 0.2803 AP and 0.4280 nDCG@10 both, to the last digit, in float32 rather than
# float64. The target is 0.005; held closer, at 0.001, so a drift shows long before it
BM25_DISTANCE = {"AP": 0.001, "nDCG@10": 0.001}


@pytest.mark.skipif(bool(MILVUS_MISSING), reason=f"needs {' and '.join(MILVUS_MISSING)}: pip install -e '.[milvus]'")
@pytest.mark.parametrize("place", MILVUS_PLACES)
def test_on_milvus_dense_ranks_as_dense_and_bm25_scores_as_bm25(runs, vaswani, tmp_path, place):
    uri = os.environ.get("GARDEN_MILVUS_SERVER") if place == "server" else None
    if place == "server" and not uri:
        pytest.skip("no Milvus server named by GARDEN_MILVUS_SERVER (.ci/run starts one)")
    # a batch of 64 queries to 1,000 hits is one search; on Milvus Lite under a shared
    # machine's load it can outlast the default 10 s, which is not what is tested here
    option = (f":uri={uri}" if uri else "") + ":timeout=120"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GARDEN_HOME", str(tmp_path / "home"))   # an empty local store: the collections built here
        milvus = run_collection(vaswani, (f"milvus-dense{option}", f"milvus-bm25{option}"), depth=1000)
    dense, on_milvus = runs.rankings["dense"], milvus.rankings[f"milvus-dense{option}"]
    swapped = 0
    for qid, ranking in dense.items():
        # exact search: the same order, but for near-ties float32 sums in Milvus's order swap
        assert_same_ranking(ranking, on_milvus[qid], label=qid)
        swapped += sum(a != b for (a, _), (b, _) in zip(ranking, on_milvus[qid]))
    assert swapped <= len(dense)  # of 1,000 places a query: at most one in a thousand
    figures = evaluate(vaswani.qrels, milvus.rankings, ("AP", "nDCG@10")).aggregates
    ours = evaluate(vaswani.qrels, runs.rankings, ("AP", "nDCG@10")).aggregates
    for measure, distance in BM25_DISTANCE.items():
        assert figures[f"milvus-bm25{option}"][measure] == pytest.approx(ours["bm25"][measure], abs=distance), measure
    # the same vectors as `dense` in this process (whatever this processor made of them): the
    # same figure but for the near-ties above
    assert figures[f"milvus-dense{option}"]["AP"] == pytest.approx(ours["dense"]["AP"], abs=1e-4)


# --- structured pipelines on a collection --------------------------------------------


def test_default_does_no_worse_than_the_hybrid_it_stands_on(figures):
    assert figures["default"]["AP"] >= figures["hybrid"]["AP"] - 1e-4
    assert figures["default"]["AP"] >= 0.325
    for metric in MEASURES:
        assert figures["default"][metric] >= figures["hybrid"][metric] - 1e-4, metric


def test_with_nothing_structured_default_ranks_exactly_as_hybrid(runs):
    # the rule: only structural bonuses reorder, and Vaswani has no topics or entities
    for qid, ranking in runs.rankings["hybrid"].items():
        assert [d for d, _ in runs.rankings["default"][qid]] == [d for d, _ in ranking], qid


def test_a_pipeline_without_a_stage_is_accepted_on_a_collection(runs, vaswani):
    # on a subset of the queries: the full run above already holds `default` to hybrid's order
    first = dict(list(vaswani.queries.items())[:SUBSET])
    subset = run_collection(dataclasses.replace(vaswani, queries=first), ["default-phrase"], depth=1000)
    assert set(subset.rankings["default-phrase"]) == set(first)
    for qid in first:
        assert ([d for d, _ in subset.rankings["default-phrase"][qid]]
                == [d for d, _ in runs.rankings["hybrid"][qid]]), qid
    assert subset.queries_per_s["default-phrase"] > 0


def test_a_structured_name_is_checked_before_anything_is_indexed():
    tiny = Collection("tiny", [Doc("1", "plasma")], {"1": "plasma"}, {"1": {"1": 1}})
    with pytest.raises(GardenError, match="no stage named 'nosuch'"):
        run_collection(tiny, ["dense", "default-nosuch"])
    with pytest.raises(GardenError, match="retrieve stage is essential"):
        run_collection(tiny, ["default-retrieve"])


def test_a_collection_story_keeps_the_order_and_the_ties_and_maps_back():
    docs = [Doc("9", "a"), Doc("10", "b"), Doc("FT-1", "c")]
    story = collection_story("tiny", docs)
    # the collection's order, as a bare retriever indexes it; ids that sort as the doc ids do
    assert [story.doc_ids[r.id] for r in story.story.records] == ["9", "10", "FT-1"]
    assert [story.doc_ids[rid] for rid in sorted(story.doc_ids)] == ["10", "9", "FT-1"]
    assert {r.kind for r in story.story.records} == {"source"}
    assert {story.doc_ids[r.id]: r.text for r in story.story.records} == {"9": "a", "10": "b", "FT-1": "c"}
    assert story.spec("q", 50).settings.resolved().candidates == 50
    assert story.spec("q", 50).as_of == COLLECTION_AS_OF


def test_only_structural_bonuses_move_the_base_order():
    ranked = Ranked(base={"a": 1.0, "b": 0.9, "c": 0.5}, relevance={"a": 0.2, "b": 0.9, "c": 1.4},
                    bonus={"phrase": {"b": 1.0}, "structure": {"c": 0.6}}, live={"a", "b", "c", "x"})
    assert [rid for rid, _ in ranked.ordered(10)] == ["c", "a", "b"]        # x has no evidence
    assert [rid for rid, _ in ranked.ordered(10, moved_by=())] == ["a", "b", "c"]
    assert [rid for rid, _ in ranked.ordered(10, moved_by=("structure", "phrase"))] == ["b", "c", "a"]
    assert [rid for rid, _ in ranked.by_relevance(2)] == ["c", "b"]


def test_triage_does_not_silence_a_collection_query():
    docs = [Doc("1", "plasma is an ionized gas"), Doc("2", "dielectric constant of liquids")]
    story = collection_story("tiny", docs)
    pipeline = StructuredPipeline("default", "bm25", indexes=IndexCache())
    query = "what does plasma mean"
    assert pipeline.run(story.spec(query, 10)).packet.decision == "skip"  # a packet would be empty
    ranked = pipeline.ranking(story.spec(query, 10), 10)
    assert ranked.triage == "skip"
    assert [story.doc_ids[rid] for rid, _ in ranked.ordered(10)] == ["1"]
