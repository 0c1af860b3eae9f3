"""The declared retriever protocol: kinds, the plugin adapter, ceilings, the one
normalization (`relevance`), the evidence label by kind, the registry's seam, and the
dense module's process caches and import hygiene."""
import json
import math
import os
import subprocess
import sys

import pytest

from garden.analyzer import Analyzer, without_function_words
from garden.errors import GardenError
from garden.retrievers import (
    FUSION, LEXICAL, SEMANTIC, Doc, PluginRetriever, ProcessCache, Registry, Retriever, RetrieverBase, as_retriever,
    evidence_kind, is_semantic, make_retriever, rank, registered, registry, relevance,
)
from garden.retrievers import dense as dense_module
from garden.retrievers.bm25 import lucene_idf

DOCS = [
    Doc("d1", "The walrus keeps a lantern in the sea cave"),
    Doc("d2", "Chocolate cake recipe: butter, sugar, cocoa and eggs"),
    Doc("d3", "The stock market fell sharply on Monday"),
    Doc("d4", "A kitten sleeps on the mat by the fire"),
    Doc("d5", "Lanterns and candles light the old lighthouse, lantern after lantern"),
]
QUERIES = ["lantern", "chocolate cake lantern", "walrus in the sea cave", "the", "xylophone lantern"]


@pytest.fixture(autouse=True)
def garden_home(tmp_path, monkeypatch):
    """Embedding caches of these tests go to a temporary folder, never the project's."""
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "garden-home"))


def indexed(spec, docs=DOCS, **options):
    retriever = make_retriever(spec, **options)
    retriever.index(docs)
    return retriever


class WordCount:
    """A plugin as small as one can be: name, index and score."""

    def __init__(self):
        self.name = "word-count"
        self.docs = []

    def index(self, docs):
        self.docs = [(d.id, set(d.text.lower().split())) for d in docs]

    def score(self, query):
        words = set(query.lower().split())
        return {i: float(len(words & terms)) for i, terms in self.docs if words & terms}


class FixedCosines:
    """A plugin embedding retriever: fixed cosines, and it says it is semantic."""

    kind = "semantic"

    def __init__(self, cosines):
        self.name = "fixed-cosines"
        self.cosines = cosines

    def index(self, docs):
        pass

    def score(self, query):
        return dict(self.cosines)


# --- kinds -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec, kind", [("bm25", LEXICAL), ("bm25s", LEXICAL), ("tfidf", LEXICAL),
                                        ("tfidf:analyzer=char", LEXICAL), ("dense", SEMANTIC),
                                        ("dense:batch_size=32", SEMANTIC), ("hybrid", FUSION)])
def test_every_builtin_declares_its_kind_and_the_whole_protocol(spec, kind):
    retriever = make_retriever(spec)
    assert retriever.kind == kind
    assert isinstance(retriever, RetrieverBase) and isinstance(retriever, Retriever)
    assert not isinstance(retriever, PluginRetriever)
    assert is_semantic(retriever) == (kind == SEMANTIC)


def test_a_retriever_is_its_own_only_member_and_hybrid_names_its_members():
    bm25 = indexed("bm25")
    assert bm25.members() == {"bm25": bm25}
    assert bm25.components("lantern") == {"bm25": bm25.score("lantern")}
    assert bm25.fuse(bm25.components("lantern")) == bm25.score("lantern")
    hybrid = indexed("hybrid", retrievers=("bm25s", "dense"), options={"dense": {"batch_size": 32}})
    members = hybrid.members()
    assert list(members) == ["bm25s", "dense"]
    assert [m.kind for m in members.values()] == [LEXICAL, SEMANTIC]
    assert hybrid.components("lantern")["bm25s"] == members["bm25s"].score("lantern")


def test_hybrid_ceiling_is_first_place_in_every_member():
    hybrid = indexed("hybrid", retrievers=("bm25", "bm25s", "tfidf"), k=10)
    assert hybrid.ceiling("lantern") == pytest.approx(3 / 11)
    best = max(hybrid.score("lantern").values())
    assert best == pytest.approx(3 / 11)  # d5 leads all three members here


# --- the adapter -------------------------------------------------------------------------


def test_the_adapter_gives_a_name_index_score_plugin_every_capability():
    retriever = as_retriever(WordCount())
    assert isinstance(retriever, PluginRetriever) and isinstance(retriever, Retriever)
    assert (retriever.name, retriever.kind) == ("word-count", LEXICAL)
    retriever.index(DOCS)
    scores = retriever.score("lantern cave")
    assert scores == {"d1": 2.0, "d5": 1.0}
    assert retriever.score_many(["lantern cave", "kitten"]) == [scores, {"d4": 1.0}]
    assert retriever.top("lantern cave", 1) == [("d1", 2.0)]
    assert retriever.top_many(["lantern cave", "kitten"], 5) == [rank(scores), [("d4", 1.0)]]
    assert retriever.members() == {"word-count": retriever}
    assert retriever.components("lantern cave") == {"word-count": scores}
    assert retriever.fuse(retriever.components("lantern cave")) == scores
    assert retriever.ceiling("lantern cave") == 1.0  # declares none: taken as scoring on [0, 1]
    assert retriever.plugin.docs  # the wrapped object is reachable
    with pytest.raises(GardenError, match="depth"):
        retriever.top("lantern", -1)


def test_the_adapter_keeps_what_a_plugin_brings_of_its_own():
    class Ranked(WordCount):
        def top_many(self, queries, k=None):
            return [[("own", 9.0)] for _ in queries]

        def ceiling(self, query):
            return 4

    retriever = as_retriever(Ranked())
    assert retriever.top_many(["a", "b"], 3) == [[("own", 9.0)], [("own", 9.0)]]
    assert retriever.top("a") == [("own", 9.0)]  # the default `top` goes through its `top_many`
    assert retriever.ceiling("a") == 4.0 and isinstance(retriever.ceiling("a"), float)


def test_make_retriever_names_a_plugin_by_the_name_it_was_made_by():
    with registry.temporarily("counting", WordCount, "test: counts words"):
        retriever = make_retriever("counting")
        assert retriever.name == "counting" and retriever.plugin.name == "word-count"
        hybrid = make_retriever("hybrid", retrievers=("counting", "bm25"))
        assert list(hybrid.members()) == ["counting", "bm25"]
        assert isinstance(hybrid.members()["counting"], PluginRetriever)


def test_a_retriever_subclass_is_taken_as_it_is():
    class Own(RetrieverBase):
        kind = SEMANTIC
        name = "own"

        def index(self, docs):
            pass

        def score(self, query):
            return {}

    own = Own()
    assert as_retriever(own) is own


@pytest.mark.parametrize("obj, lines", [
    (object(), ["no index method", "no score method", "no name"]),
    (type("Fusing", (WordCount,), {"kind": "fusion"})(), ["kind must be one of lexical, semantic (got 'fusion'); "
                                                          "a retriever that fuses others subclasses"]),
    (type("Odd", (WordCount,), {"kind": "sparse"})(), ["(got 'sparse')"]),
])
def test_the_adapter_refuses_what_is_not_a_retriever_one_line_per_problem(obj, lines):
    with pytest.raises(GardenError) as error:
        as_retriever(obj)
    assert len(error.value.messages) == len(lines)
    for message, needle in zip(error.value.messages, lines):
        assert needle in message, message


def test_a_factory_that_makes_no_retriever_is_one_line():
    with registry.temporarily("nothing", lambda: object(), "test: makes nothing"):
        with pytest.raises(GardenError, match="retriever nothing: object has no score method"):
            make_retriever("nothing")


# --- the evidence label by kind ----------------------------------------------------------


def test_a_plugin_that_says_semantic_is_labelled_like_dense():
    members = {"fixed-cosines": as_retriever(FixedCosines({"a": 0.8})), "word-count": as_retriever(WordCount())}
    assert evidence_kind({"fixed-cosines": 0.8, "word-count": 0.0}, members) == "semantic_only"
    assert evidence_kind({"fixed-cosines": 0.8, "word-count": 1.0}, members) == "lexical_only"
    plain = {"word-count": as_retriever(WordCount())}
    assert evidence_kind({"word-count": 1.0}, plain) == "lexical_only"


def test_dense_with_options_is_semantic_like_dense():
    for spec in ("dense", "dense:batch_size=32"):
        retriever = make_retriever(spec)
        assert evidence_kind({"dense": 0.9}, {"dense": retriever}) == "semantic_only"
    hybrid = make_retriever("hybrid", options={"dense": {"batch_size": 32}})
    assert evidence_kind({"bm25": 0.0, "dense": 0.9}, hybrid.members()) == "semantic_only"
    assert evidence_kind({"bm25": 1.2, "dense": 0.9}, hybrid.members()) == "lexical_only"


def test_evidence_kind_refuses_a_score_of_no_member():
    with pytest.raises(GardenError, match="'dense', which is not a member"):
        evidence_kind({"dense": 0.5}, {"bm25": make_retriever("bm25")})


# --- ceilings ------------------------------------------------------------------------------

LEXICAL_SPECS = ["bm25", "bm25:variant=plus", "bm25:idf=okapi", "bm25:k1=0.3:b=1", "bm25s",
                 "bm25s:method=robertson", "bm25s:method=atire", "bm25s:method=bm25l", "bm25s:method=bm25+",
                 "bm25s:k1=3:b=0", "tfidf", "tfidf:analyzer=char", "tfidf:sublinear_tf=true", "hybrid"]


@pytest.mark.parametrize("spec", LEXICAL_SPECS)
def test_no_score_passes_the_ceiling(spec):
    retriever = indexed(spec)
    for query in QUERIES:
        ceiling = retriever.ceiling(query)
        assert math.isfinite(ceiling) and ceiling >= 0
        for doc, value in retriever.score(query).items():
            # bm25s keeps its scores in float32: a relative ulp of room
            assert value <= ceiling * (1 + 1e-6) + 1e-12, (spec, query, doc, value, ceiling)


@pytest.mark.parametrize("spec", ["bm25", "bm25s"])
def test_a_saturated_document_comes_close_to_the_ceiling(spec):
    # b = 0: no length normalization, so tf / (tf + k1) -> 1 as a word repeats
    docs = [Doc("many", " ".join(["lantern"] * 5000)), Doc("one", "lantern cave"), Doc("none", "granite")]
    retriever = indexed(f"{spec}:b=0", docs=docs)
    scores = retriever.score("lantern")
    assert scores["many"] / retriever.ceiling("lantern") == pytest.approx(1.0, abs=1e-3)
    assert scores["one"] < scores["many"]


def test_bm25s_ceiling_is_bm25s_without_the_k1_plus_1_numerator():
    bm25, bm25s = indexed("bm25"), indexed("bm25s")
    for query in QUERIES:
        assert bm25.ceiling(query) == pytest.approx(bm25s.ceiling(query) * (1.5 + 1), rel=1e-12)


def test_bm25s_ceiling_by_hand():
    terms = Analyzer()("lantern cave xylophone")  # two seen words and one no record holds
    tokens = [Analyzer()(d.text) for d in DOCS]
    df = {t: sum(t in doc for doc in tokens) for t in terms}
    expected = sum(lucene_idf(len(DOCS), df[t]) for t in terms)
    assert df["xylophon"] == 0
    assert indexed("bm25s").ceiling("lantern cave xylophone") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("spec", ["tfidf", "dense"])
def test_a_cosine_ceiling_is_one(spec):
    assert indexed(spec).ceiling("anything at all") == 1.0


def test_an_empty_index_has_a_zero_ceiling():
    for spec in ("bm25", "bm25s"):
        assert indexed(spec, docs=[]).ceiling("lantern") == 0.0


# --- relevance -----------------------------------------------------------------------------


def test_lexical_relevance_is_the_score_on_content_words_over_their_ceiling():
    query = "where is the lantern in the cave"
    content = without_function_words(query)
    bm25 = indexed("bm25")
    analyzer = Analyzer()
    tokens = [analyzer(d.text) for d in DOCS]
    avgdl = sum(map(len, tokens)) / len(tokens)
    k1, b = 1.5, 0.75
    idf = {t: lucene_idf(len(tokens), sum(t in doc for doc in tokens)) for t in analyzer(content)}
    ceiling = sum(idf[t] * (k1 + 1) for t in analyzer(content))
    expected = {}
    for doc, terms in zip(DOCS, tokens):
        value = sum(idf[t] * terms.count(t) * (k1 + 1) / (terms.count(t) + k1 * (1 - b + b * len(terms) / avgdl))
                    for t in analyzer(content))
        if value:
            expected[doc.id] = value / ceiling
    got = relevance(bm25, query, content, 0.35)
    assert set(got) == set(expected) == {"d1", "d5"}
    for doc in expected:
        assert got[doc] == pytest.approx(expected[doc], rel=1e-12)
    assert all(0 < v <= 1 for v in got.values())


def test_semantic_relevance_is_the_cosine_above_the_floor_rescaled():
    member = FixedCosines({"a": 0.9, "b": 0.35, "c": 0.1, "d": 0.6})
    got = relevance(member, "whole query", "content words", 0.35)
    assert got == pytest.approx({"a": (0.9 - 0.35) / 0.65, "d": (0.6 - 0.35) / 0.65}, rel=1e-15)
    assert relevance(member, "q", "q", 0.0) == pytest.approx({"a": 0.9, "b": 0.35, "c": 0.1, "d": 0.6})


def test_semantic_relevance_reads_the_whole_query_and_dense_options_change_nothing():
    query = "where is the lantern in the cave"
    content = without_function_words(query)
    plain, batched = indexed("dense"), indexed("dense:batch_size=32")
    raw = plain.score(query)
    expected = {d: (v - 0.35) / 0.65 for d, v in raw.items() if v > 0.35}
    assert expected, "the query must clear the floor somewhere for this test to mean anything"
    assert relevance(plain, query, content, 0.35) == pytest.approx(expected, abs=1e-12)
    assert relevance(batched, query, content, 0.35) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("floor", [1.0, -0.1, float("nan"), float("inf"), "0.3", True])
def test_relevance_refuses_a_floor_out_of_range(floor):
    with pytest.raises(GardenError, match="semantic_floor must be a finite number from 0 to below 1"):
        relevance(FixedCosines({"a": 0.5}), "q", "q", floor)


def test_relevance_refuses_a_non_finite_score_naming_the_member():
    with pytest.raises(GardenError, match="retriever fixed-cosines: record a got the score nan"):
        relevance(FixedCosines({"a": float("nan")}), "q", "q", 0.35)


# --- the registry --------------------------------------------------------------------------


def test_scoped_forgets_what_was_registered_inside():
    with registry.scoped():
        registry.add("passing-through", WordCount, "test")
        assert "passing-through" in registered()
        assert make_retriever("passing-through").name == "passing-through"
    assert "passing-through" not in registered()
    with pytest.raises(GardenError, match="unknown retriever 'passing-through'"):
        make_retriever("passing-through")


def test_temporarily_overrides_a_name_for_the_block_only():
    with registry.temporarily("bm25", WordCount, "test: not bm25") as entry:
        assert entry.origin == "plugin test" and registry.get("bm25").factory is WordCount
    assert registry.get("bm25").origin == "builtin"
    assert registry.get("bm25").description != "test: not bm25"


def test_a_registry_of_its_own_has_the_builtins_and_shares_nothing_with_the_process_one():
    own = Registry("garden.retrievers", "garden.no-such-group")
    own.add("counting", WordCount, "test")
    builtins = {"bm25", "bm25s", "tfidf", "dense", "hybrid", "cross", "milvus-bm25", "milvus-dense", "milvus-hybrid"}
    assert set(own.names()) == builtins | {"counting"}
    assert all(own.get(name).origin == "builtin" for name in builtins)
    assert "counting" not in registry.names() and builtins <= set(registry.names())


# --- the dense module's caches and imports ----------------------------------------------------


def test_the_process_caches_are_bounded_least_recently_used_first():
    cache = ProcessCache(limit=2)
    made = []

    def make(value):
        return lambda: made.append(value) or value

    assert cache.get("a", make(1)) == 1 and cache.get("b", make(2)) == 2
    assert cache.get("a", make(99)) == 1  # kept: not made again, and now the most recent
    cache.get("c", make(3))
    assert made == [1, 2, 3] and len(cache) == 2 and "b" not in cache and "a" in cache
    cache.clear()
    assert len(cache) == 0
    assert dense_module.QUERY_VECTORS.limit == dense_module.QUERY_CACHE_SIZE
    with pytest.raises(GardenError, match="at least one entry"):
        ProcessCache(limit=0)


def test_a_repeated_query_is_encoded_once():
    retriever = indexed("dense")
    retriever.score("a question asked twice over")
    before = retriever.queries_encoded
    retriever.score("a question asked twice over")
    assert retriever.queries_encoded == before
    assert (str(retriever.model_path), retriever.backend, "a question asked twice over") in dense_module.QUERY_VECTORS


def clean_run(script: str) -> dict:
    """Run `script` in a fresh interpreter whose environment holds only PATH, and read the
    JSON it prints last."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_dense_changes_no_environment_variable():
    got = clean_run(
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        "import garden.retrievers.dense\n"
        "print(json.dumps({'same': dict(os.environ) == before,\n"
        "                  'hub': 'huggingface_hub' in sys.modules,\n"
        "                  'st': 'sentence_transformers' in sys.modules}))\n")
    assert got == {"same": True, "hub": False, "st": False}


def test_loading_the_model_switches_the_hub_offline_before_it_is_imported(tmp_path):
    got = clean_run(
        "import json, os\n"
        "from garden.retrievers import dense\n"
        "from garden.retrievers._encoders import load_encoder\n"
        "load_encoder('torch', dense.model_dir())\n"
        "import huggingface_hub.constants as constants\n"
        "print(json.dumps({'env': [os.environ.get('HF_HUB_OFFLINE'), os.environ.get('TRANSFORMERS_OFFLINE')],\n"
        "                  'hub': constants.HF_HUB_OFFLINE}))\n")
    assert got == {"env": ["1", "1"], "hub": True}


def test_a_fusion_makes_its_members_from_the_registry_that_makes_it():
    """A registry of one's own (a study's own retrievers) reaches the members of its
    fusions; the process's registry does not know them."""
    from garden.errors import GardenError
    from garden.retrievers import ENTRY_POINT_GROUP, Registry, make_retriever
    from garden.retrievers.hybrid import HybridRetriever

    class Alpha:
        name = "alpha"

        def index(self, docs):
            self.ids = [d.id for d in docs]

        def score(self, query):
            return {i: 1.0 for i in self.ids if query}

    mine = Registry("garden.retrievers", ENTRY_POINT_GROUP)
    mine.add("alpha", Alpha, "scores every document 1")
    fused = mine.make("hybrid:retrievers=alpha+bm25")
    assert isinstance(fused, HybridRetriever) and list(fused.members()) == ["alpha", "bm25"]
    with pytest.raises(GardenError, match="unknown retriever 'alpha'"):
        make_retriever("hybrid:retrievers=alpha+bm25")
