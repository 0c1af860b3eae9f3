"""`milvus-bm25`, `milvus-dense`, `milvus-hybrid`: the store's retrieval run on Milvus.

Retrieval alone moves: the story's records are indexed as a Milvus collection and each
query is answered by a Milvus search; the story tables, the phrase index and every stage
after retrieval (the eligibility check, the reranker, packing) stay in the garden's process. The client
is `pymilvus`; the engine is Milvus Lite (PyPI `milvus-lite`) in a local store under the
garden home by default (`derived_dir()/milvus/garden.db`, served from inside this
process), or any Milvus server named by the `uri` option (`http://127.0.0.1:19530`; say
one `milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530` serves). Neither
package is needed by the rest of the garden: they are imported on first use, and making
one of these retrievers without them is one GardenError naming `pip install -e '.[milvus]'`.

`milvus-bm25` is Milvus's full-text search: the record text in a VARCHAR field with an
analyzer, a BM25 schema Function writing a SPARSE_FLOAT_VECTOR field, searched with
metric BM25 (k1 = 1.5, b = 0.75 and Lucene's idf log(1 + (N - n + 0.5) / (n + 0.5)), the
numbers of `bm25`; the analyzer is Milvus's `standard` one: words of letters and digits,
lower-cased, with `bm25`'s stopword list; Milvus Lite has no stemmer). `milvus-dense` holds
the garden's own all-MiniLM-L6-v2 embeddings (from the embedding cache and encoder,
exactly as `dense` makes them) in a FLOAT_VECTOR field, metric IP, and encodes queries as
`dense` does: on Milvus Lite searched exactly (FLAT), so it ranks as `dense` does; on a
server that builds indexes through HNSW (M 16, efConstruction 128, ef 512 or the hits
asked), the operator's options. `milvus-hybrid` is `hybrid` (reciprocal-rank fusion,
k = 60) of the two; on a server without a BM25 function (before Milvus 2.5) of `bm25` in
the garden's process and `milvus-dense`. What the engine can do is read from its version.

Each retriever indexes a story once. Its collection's name carries the retriever's family
(kind and options), a schema version, the sha256 of the story's sorted record ids and the
sha256 of its content (ids and texts, the family, the schema, and for `milvus-dense` the
model release and backend): an unchanged story finds its collection, in this process or a
later one, and inserts nothing (its row count and recorded properties are checked); a
changed one gets a new collection, built under a temporary name and renamed into place
when complete, and the other collections of the same family and the same id set (an
edited story, an older schema) are dropped. A collection is known as the same story's by
its id set only: a story that gains or loses records leaves its old collection behind
(removing `derived_dir()/milvus`, or dropping the `garden_*` collections on a server,
costs one rebuild).

By default records carry their id and text only, no filter runs in Milvus, and every
candidate is checked by the garden's own eligibility check after retrieval, as for every retriever:
the structured pipeline takes the best `candidates` and then checks their eligibility, and reports what
the eligibility check rejected. With `pushdown=true` each record also carries what the hard eligibility rules
read (`RecordFields`: kind, project, privacy, the day it appears and the days it is live,
as `garden.rerank.timeline.record_fields` makes them) as scalar fields, and a pipeline's
search carries the query's `as_of` and privacy as a Milvus filter (`filter_for`), so the
candidates are the best of the records the query may be served. That is another rule, not
the same one made cheaper: a record the filter leaves out is not among the rejections, and
one ranked below it may take its place. It is therefore an option, not the default; the
eligibility check still checks every candidate. The soft rules (project scope, topics) depend on what
the query resolved and on the route a candidate came by, so they are never pushed down.

Options: `uri` (above), `timeout` (seconds, default 10: connecting and each search;
building calls wait at least BUILD_TIMEOUT), `limit` (the most records one search
returns, default and at most 16384), `pushdown` (above, default false), `k1`, `b` and
`stopwords` for `milvus-bm25`, `backend` for `milvus-dense` (as `dense`'s) with `index`
(auto, flat, hnsw), `m`, `ef_construction` and `ef` (HNSW's), and `k` and `depth` for
`milvus-hybrid` (as `hybrid`'s).

Faults are one GardenError line naming the retriever and the URI, and what to do: an
engine that cannot be reached, a Milvus Lite store another process holds, a call that
outlives `timeout`, a collection missing or not the garden's. Nothing falls back to an
in-process retriever.
"""
from __future__ import annotations

import json
import re
from importlib import metadata
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from garden.analyzer import Analyzer
from garden.errors import GardenError
from garden.retrievers import (LEXICAL, SEMANTIC, Doc, ProcessCache, boolean, choice, integer, rank,
                               make_retriever, number, register)
from garden.retrievers._encoders import BACKENDS, load_encoder
from garden.retrievers._term_stats import TermStatistics
from garden.retrievers.dense import DEFAULT_BACKEND, DenseRetriever, cache_space, model_width
from garden.retrievers.hybrid import HybridRetriever
from garden.retrievers._milvus import (ENGINE_OPTIONS, B, DEFAULT_TIMEOUT, K1, MAX_LIMIT, MAX_VARCHAR, TIE_MARGIN,
                                      _clip, _MilvusRetriever, _searching, _sha, builds_indexes, has_bm25)

# Milvus receives the garden's terms joined by spaces (`MilvusBM25.analyzed`); its `standard`
# tokenizer (Milvus Lite: a run of word characters, lower-cased) gives them back one for one,
# with no stop filter: the garden removed the stopwords already
MILVUS_ANALYZER = {"tokenizer": "standard", "filter": ["lowercase"]}
ANALYSIS = "garden.analyzer 1"  # the garden's analysis as Milvus indexes it: a change gives new collections
WORDS_KEPT = 65536  # candidates whose terms a `milvus-bm25` keeps between queries
# candidates whose vectors a `milvus-dense` keeps between queries (1.5 KiB each): reading 50
# from the embedding cache took 1.1 ms of a 6 ms query on a standalone at 10,000 records
VECTORS_KEPT = 16384
ROWS_ENCODED = 4096  # texts `milvus-dense` reads from the embedding cache (or encodes) at once when indexing
# HNSW (Malkov & Yashunin 2018, "Efficient and robust approximate nearest neighbor search
# using Hierarchical Navigable Small World graphs"): M links a node, efConstruction the
# candidates kept while building; a search keeps ef >= the hits asked (Milvus requires it).
# ef 512: at 100,000 generated records ef 128 found 0.90 to 0.93 of exact search's top 100
# for the generated cases' short queries, 512 found 0.987 (0.992 counting ties), at about
# 6 ms a search either way (docs/milvus.md, "A Milvus standalone")
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF = 16, 128, 512
HNSW_EF_MOST = 32768  # Milvus's largest ef
INDEXES = ("auto", "flat", "hnsw")  # auto: hnsw on an engine that builds indexes, flat on Milvus Lite


def _then_none(items: Iterable) -> Iterator:
    """`items`, then None: the end of a stream, so a last partial chunk is flushed."""
    yield from items
    yield None


def _stemmer_release() -> str:
    """PyStemmer's release: another may stem a word otherwise, so it names the collection."""
    try:
        return "PyStemmer==" + metadata.version("PyStemmer")
    except metadata.PackageNotFoundError:
        return "PyStemmer==none"


@register("milvus-bm25", "Milvus full-text BM25 (k1=1.5, b=0.75, Lucene idf) over the garden's own analysis (bm25's "
                         "words: stopwords removed, Snowball stems) on a local Milvus Lite store or a server (uri)")
class MilvusBM25(_MilvusRetriever):
    """Milvus's own BM25 over a sparse field the garden fills with its analyzed words."""
    kind = LEXICAL
    field, metric = "sparse", "BM25"
    OPTIONS = {**ENGINE_OPTIONS, "k1": number(0, above=True), "b": number(0, 1), "stopwords": boolean(),
               "stem": boolean()}

    def __init__(self, uri: str | None = None, timeout: float = DEFAULT_TIMEOUT, limit: int = MAX_LIMIT,
                 k1: float = K1, b: float = B, stopwords: bool = True, stem: bool = True, pushdown: bool = False):
        super().__init__("milvus-bm25", uri, timeout, limit, pushdown)
        self.k1, self.b = float(k1), float(b)
        self.analyzer = Analyzer(stopwords=stopwords, stem=stem)
        self.stats = TermStatistics()
        self._words: ProcessCache = ProcessCache(WORDS_KEPT)  # a candidate's terms, by id

    def family(self) -> str:
        options = _sha(repr(self.k1), repr(self.b), self.analyzer.key).hexdigest()[:8]
        return f"bm25_{options}"

    def identity(self) -> list[str]:
        # the words are the garden's: a new analysis (or stemmer release) is another collection
        return [json.dumps(MILVUS_ANALYZER, sort_keys=True), self.analyzer.key, ANALYSIS, _stemmer_release()]

    def _check_engine(self) -> None:
        version = self.engine()
        if not has_bm25(version):
            raise GardenError(f"retriever {self.name}: Milvus at {self.where} ({version}) has no BM25 function "
                              "(Milvus servers have one from 2.5; Milvus Lite has one); use bm25, or milvus-hybrid, "
                              "whose lexical member is then bm25 in the garden's process")

    def words(self, text: str) -> list[str]:
        """The terms `bm25` makes of `text` (garden.analyzer): what Milvus indexes and searches."""
        return self.analyzer(text)

    def analyzed(self, text: str) -> str:
        """`text` as Milvus receives it: the garden's terms joined by spaces, which Milvus's
        `standard` tokenizer (a run of word characters, lower-cased) gives back one for one."""
        return " ".join(self.words(text))

    def schema(self, client):
        from pymilvus import DataType, Function, FunctionType

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True,
                         analyzer_params=MILVUS_ANALYZER)
        schema.add_field(self.field, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name="text_bm25", function_type=FunctionType.BM25,
                                     input_field_names=["text"], output_field_names=[self.field]))
        return schema

    def index_params(self, client):
        params = client.prepare_index_params()
        params.add_index(field_name=self.field, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                         params={"bm25_k1": self.k1, "bm25_b": self.b})
        return params

    def _check_doc(self, doc: Doc) -> None:
        super()._check_doc(doc)
        if len(doc.text) * 4 > MAX_VARCHAR and len(self.analyzed(doc.text).encode("utf-8")) > MAX_VARCHAR:
            raise GardenError(f"retriever {self.name}: record {doc.id}: its words are longer than Milvus's "
                              f"{MAX_VARCHAR}-byte VARCHAR, so Milvus cannot search all of it; use bm25")

    def rows(self, docs: Iterable[Doc]) -> Iterator[dict]:
        for doc in docs:
            yield {"id": doc.id, "text": self.analyzed(doc.text)}

    def _indexed(self, open_docs) -> None:
        self._words.clear()
        self.stats = self._statistics(open_docs, lambda texts: TermStatistics.count(texts, self.words))

    def _queries(self, queries: list[str]) -> list:
        return [self.analyzed(q) for q in queries]

    def _searchable(self, query: str) -> bool:
        return bool(self.words(query))

    def _score(self, distance: float) -> float:
        # a BM25 score is never negative; Milvus Lite 3.2 reports it negated, a Milvus
        # server as it is
        return abs(float(distance))

    def scores_of(self, query: str, ids: Sequence[str], eligible=None) -> dict[str, float]:
        """BM25 of the records `ids` for `query`, computed here from the saved statistics
        (each term's document frequency, the number of records and their average length)
        and the records' own words: the formula Milvus scores with (the tests hold the two
        within 1e-5), so the structure reads a candidate's score without a search."""
        terms = self.words(query)
        if not terms:
            return {}
        held = self._admitted(ids, eligible)
        return self.stats.bm25(terms, list(self._record_words(held).items()), self.k1, self.b)

    def _record_words(self, ids: list[str]) -> dict[str, list[str]]:
        """Each record's terms: from its text in this process, else the words Milvus holds
        (one read by id for those not kept since an earlier query)."""
        out = {rid: self._words.get(rid, lambda rid=rid: self.words(self._text[rid]))
               for rid in ids if rid in self._text or rid in self._words}
        missing = [rid for rid in ids if rid not in out]
        for rid, text in self._stored(missing, "text").items():
            out[rid] = self._words.get(rid, lambda text=text: text.split())
        return out

    def ceiling(self, query: str) -> float:
        """The best score any record could reach for `query`, as `bm25` bounds its own:
        each query term saturated, sum of idf x (k1 + 1) over the query's terms (a
        repeated term counts each time, as Milvus weighs it), a term no record holds at
        the highest idf. The document frequencies are the saved statistics of the story
        (Milvus gives no idf back), counted with the same analysis when it was indexed;
        Milvus Lite keeps its own per segment, and a story indexed in one flush is one
        segment, so they are the same numbers. 0 for an empty story."""
        return self.stats.ceiling(self.words(query), self.k1)


@register("milvus-dense", "all-MiniLM-L6-v2 embeddings (as dense makes them) in Milvus, metric IP: searched "
                          "exactly (FLAT) on Milvus Lite, through an HNSW index (M 16, efConstruction 128) on a "
                          "server; a local Milvus Lite store or a server (uri)")
class MilvusDense(_MilvusRetriever):
    """The vectors `dense` makes, searched in Milvus instead of in this process."""
    kind = SEMANTIC
    field, metric = "vector", "IP"
    DENSE_OPTIONS = {"backend": choice(*BACKENDS), "index": choice(*INDEXES), "m": integer(2, 2048),
                     "ef_construction": integer(8, 65536), "ef": integer(1, HNSW_EF_MOST)}
    OPTIONS = {**ENGINE_OPTIONS, **DENSE_OPTIONS}

    def __init__(self, uri: str | None = None, timeout: float = DEFAULT_TIMEOUT, limit: int = MAX_LIMIT,
                 backend: str = DEFAULT_BACKEND, pushdown: bool = False, index: str = "auto", m: int = HNSW_M,
                 ef_construction: int = HNSW_EF_CONSTRUCTION, ef: int = HNSW_EF):
        super().__init__("milvus-dense", uri, timeout, limit, pushdown)
        self.backend = backend
        self.index_choice, self.m, self.ef_construction, self.ef = index, int(m), int(ef_construction), int(ef)
        self._dense = DenseRetriever(backend=backend)  # the model's files, checked now, with their install line
        self.width = model_width(self._dense.model_path)
        self._vectors: ProcessCache = ProcessCache(VECTORS_KEPT)  # a candidate's vector, by id

    @property
    def index_type(self) -> str:
        """The index the collection is built with: `index`, or for `auto` HNSW where the
        engine builds indexes and FLAT (exact) on Milvus Lite, which walks every row anyway.
        A server is asked its version (once per process) the first time this is read."""
        if self.index_choice != "auto":
            return self.index_choice.upper()
        return "HNSW" if builds_indexes(self.engine()) else "FLAT"

    @property
    def encoded(self) -> int:
        """Record texts this retriever ran through the model (not found in the embedding cache)."""
        return self._dense.encoded

    def family(self) -> str:
        # FLAT keeps the name it always had; an HNSW graph is another collection per parameters
        graph = f"_hnsw_m{self.m}_efc{self.ef_construction}" if self.index_type == "HNSW" else ""
        return "dense_" + re.sub(r"[^A-Za-z0-9]", "_", self.backend) + graph

    def identity(self) -> list[str]:
        return [cache_space(self.backend), str(self.width)]

    def schema(self, client):
        from pymilvus import DataType

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
        schema.add_field(self.field, DataType.FLOAT_VECTOR, dim=self.width)
        return schema

    def index_params(self, client):
        params = client.prepare_index_params()
        graph = {"M": self.m, "efConstruction": self.ef_construction} if self.index_type == "HNSW" else {}
        params.add_index(field_name=self.field, index_type=self.index_type, metric_type="IP", params=graph)
        return params

    def search_params(self, limit: int) -> dict:
        if self.index_type != "HNSW":
            return {"metric_type": self.metric}
        return {"metric_type": self.metric, "params": {"ef": min(max(self.ef, limit), HNSW_EF_MOST)}}

    def rows(self, docs: Iterable[Doc]) -> Iterator[dict]:
        # the vectors `dense` would search: its embedding cache, the model for what is
        # missing, a chunk at a time (a story ingested whole is never held)
        chunk: list[Doc] = []
        for doc in _then_none(docs):
            if doc is not None:
                chunk.append(doc)
                if len(chunk) < ROWS_ENCODED:
                    continue
            vectors = self._dense.embeddings([d.text for d in chunk]) if chunk else ()
            for d, vector in zip(chunk, vectors):
                # the text is kept for reading; scoring reads the vector, so a text past
                # Milvus's VARCHAR is stored cut
                yield {"id": d.id, "text": _clip(d.text), self.field: vector.astype(np.float32)}
            chunk = []

    def _indexed(self, open_docs) -> None:
        self._vectors.clear()
        # queries always need the model: loaded now, so the first query does not pay for it
        load_encoder(self.backend, self._dense.model_path)

    def _queries(self, queries: list[str]) -> list:
        # the vectors `dense` gives these queries, alone or in a batch (kept in the process
        # and in the user's cache)
        return [v.astype(np.float32).tolist() for v in self._dense._query_vectors(queries)]

    def _score_one(self, query: str, where: str = "") -> dict[str, float]:
        if self.collection is None or not query.strip():
            return {}
        vector = self._dense.query_vector(query).astype(np.float32).tolist()
        return dict(self._search([vector], self._every(), where)[0])

    def scores_of(self, query: str, ids: Sequence[str], eligible=None) -> dict[str, float]:
        """The cosines of the records `ids` with `query`: the inner products of the vectors
        Milvus holds for them (`vectors`) with the query's, in float32 as Milvus computes
        them, without a search."""
        held = self._admitted(ids, eligible)
        if not held or not query.strip():
            return {}
        vectors = self.vectors(held)
        found = [rid for rid in held if rid in vectors]
        if not found:
            return {}
        matrix = np.asarray([vectors[rid] for rid in found], dtype=np.float32)
        products = matrix @ self._dense.query_vector(query).astype(np.float32)
        return dict(zip(found, products.astype(np.float64).tolist()))

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of the records `ids` that the collection holds: kept since an earlier
        query (the last VECTORS_KEPT), else the embedding cache's for a text this process
        indexed (encoded there if missing), else Milvus's, read by id (a story in Milvus);
        one read for all that are not kept. What Milvus searched, so the same numbers."""
        kept = self._vectors
        missing = [rid for rid in dict.fromkeys(ids) if rid not in kept]
        local = [rid for rid in missing if rid in self._text]
        found = dict(zip(local, self._dense.embeddings([self._text[rid] for rid in local]))) if local else {}
        found.update(self._stored([rid for rid in missing if rid not in found], self.field))
        out = {}
        for rid in ids:
            if rid in kept or rid in found:
                out[rid] = kept.get(rid, lambda rid=rid: np.asarray(found[rid], dtype=np.float32))
        return out

    def ceiling(self, query: str) -> float:
        """1.0: a score is the cosine of two unit vectors."""
        return 1.0


@register("milvus-hybrid", "reciprocal-rank fusion (k=60) of milvus-bm25 and milvus-dense, as hybrid fuses")
class MilvusHybrid(HybridRetriever):
    """`hybrid` of `milvus-bm25` and `milvus-dense`, sharing `uri`, `timeout` and `limit`:
    each member answers in its own round trip, and the ranks are fused in this process."""

    in_contrast = False  # as its members: not a column of the contrast matrix

    OPTIONS = {**ENGINE_OPTIONS, **MilvusDense.DENSE_OPTIONS, "k": number(0, above=True), "depth": integer(1)}
    MAKES_MEMBERS = True

    def __init__(self, uri: str | None = None, timeout: float = DEFAULT_TIMEOUT, limit: int = MAX_LIMIT,
                 backend: str = DEFAULT_BACKEND, k: float = 60.0, depth: int = 1000, pushdown: bool = False,
                 index: str = "auto", m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION, ef: int = HNSW_EF,
                 registry=None):
        shared: dict[str, Any] = {"timeout": float(timeout), "limit": int(limit), "pushdown": bool(pushdown)}
        if uri is not None:
            shared["uri"] = uri
        dense = {**shared, "backend": backend, "index": index, "m": m, "ef_construction": ef_construction, "ef": ef}
        super().__init__(("milvus-bm25", "milvus-dense"), k=k, depth=depth, registry=registry,
                         options={"milvus-bm25": shared, "milvus-dense": dense})
        self.name = "milvus-hybrid"
        self._make = registry.make if registry is not None else make_retriever
        self.lexical = "milvus-bm25"  # the member that serves the lexical part (settle may change it)

    def settle(self) -> str:
        """The member that serves the lexical part, chosen from the engine: `milvus-bm25`
        where Milvus has a BM25 function (Milvus Lite, servers from 2.5), else `bm25` in the
        garden's process (no Milvus server before 2.5 has a BM25 function), fused
        with `milvus-dense` as before; a candidate's `why` then names `bm25`. A local store
        is Milvus Lite without asking; a server is asked its version once per process."""
        lexical = self._members.get("milvus-bm25")
        if isinstance(lexical, MilvusBM25) and not has_bm25(lexical.engine()):
            rest = {name: member for name, member in self._members.items() if name != "milvus-bm25"}
            self._members = {"bm25": self._make("bm25"), **rest}
            self.lexical = "bm25"
        return self.lexical

    def index(self, docs: Sequence[Doc]) -> None:
        self.settle()
        super().index(docs)

    def components(self, query: str, eligible=None, depth: int | None = None) -> dict[str, dict[str, float]]:
        """`hybrid`'s, with `milvus-dense` searching in a thread of its own while the
        lexical member scores here (`bm25` in the garden's process, or `milvus-bm25`'s own
        search): a search is mostly waiting for Milvus (a round trip to a standalone took
        about 2 ms at 10,000 records, more than all of in-process retrieval), so the two
        overlap. While `milvus-dense` still searches, it reads the vectors of the lexical
        member's best `depth` records (`vectors`), which the retrieve stage asks it to score
        next when its own hits lack them. The scores are those of asking one member after
        the other."""
        told = eligible if eligible is not None and self.pushes_down else None
        members = self._members
        dense = members.get("milvus-dense")
        if depth is None or len(members) != 2 or not isinstance(dense, MilvusDense) or self.lexical not in members:
            return super().components(query, eligible, depth)
        pending = _searching().submit(self.component, dense, query, told, depth)
        lexical = self.component(members[self.lexical], query, told, depth)
        if not pending.done():
            dense.vectors([rid for rid, _ in rank(lexical, depth + TIE_MARGIN)])
        found = {self.lexical: lexical, "milvus-dense": pending.result()}
        return {name: found[name] for name in members}


SERVERS = ("start_local_server", "start_standalone", "stop_local_server")


def __getattr__(name: str):
    """A local Milvus server, embedded or standalone, started and stopped: public here for
    the experiments that measure one, and loaded only when asked for, so that making a
    pipeline (which imports this module) does not import what starting a process needs."""
    if name in SERVERS:
        from garden.retrievers import _milvus_server

        return getattr(_milvus_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
