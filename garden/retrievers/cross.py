"""`cross`: a cross-encoder reranking a base retriever's best records.

Nogueira & Cho (2019), "Passage Re-ranking with BERT": a cheap retriever finds candidates,
and a cross-encoder, which reads the query and a candidate together, scores each pair.
Here the base is any registered retriever (`base=bm25s`, the default; `hybrid`, `dense`,
a plugin), its best `depth` records (100 by default, ties by id) are scored by a
sentence-transformers `CrossEncoder` folder on disk (`model=DIR`, checked before anything
in it is loaded, as every model folder is: `garden.retrievers._model_folder`), and ranked
by that score, ties by id. A record past `depth` is not ranked at all: a reranker's
ranking holds what it read, so a figure measured deeper than `depth` (AP, R@1000) counts
the rest as not retrieved.

The score of a pair is the logistic of the model's one logit, 1 / (1 + e^-z), the
activation sentence-transformers' CrossEncoder gives a one-label model by default: it is
positive (a bare pipeline packs every record reranked) and at most 1 (the ceiling). Each
pair is scored in the same batches whichever way its query is asked (`score`,
`top_many`), the candidates in the base's order.

Its kind is `fusion`: its members are the cross-encoder (`cross`, read as a semantic
member: its score is at most 1, like a cosine) and the base's own members, so a packet's
`why` carries the cross-encoder's score beside the base's. Whether it earns a place as a
stage of the structured pipeline was not measured (docs/encoding.md says why).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError
from garden.retrievers import (FUSION, SEMANTIC, Doc, ProcessCache, RetrieverBase, State, custom, integer,
                               make_retriever, rank, register)
from garden.retrievers._encoders import SAFE_LOADING, quiet_transformers
from garden.retrievers._model_folder import ModelFolder, folder_option, model_folder

MODEL_WORDS = "a folder holding a sentence-transformers CrossEncoder (its config.json, safetensors weights)"
BASE_WORDS = "a registered retriever's name (bm25s, hybrid, dense, ...), not cross itself"
DEPTH = 100        # the base's records reranked a query: the usual depth of a reranking run
BATCH_SIZE = 32    # pairs a forward pass
JUDGE = "cross"    # the cross-encoder's name among the members: its score in a candidate's scores and `why`

MODELS: ProcessCache = ProcessCache(limit=2)   # loading one takes seconds


def _base(value) -> str:
    if not isinstance(value, str) or not value.strip() or value.strip() == "cross":
        raise ValueError("not a base retriever")
    return value.strip()


def _no_text(text: str):
    raise ValueError("a mapping cannot be written in a spec")


def _base_options(value) -> dict:
    if not isinstance(value, Mapping):
        raise ValueError("not a mapping")
    return dict(value)


def check_cross_encoder(folder: ModelFolder) -> None:
    """GardenError, one line naming config.json's field, unless the folder holds a sequence
    classifier with one output: a relevance score a pair."""
    config = folder.config
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures \
            and not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise GardenError(f"{folder.where}: {folder.file('config.json')}: architectures {architectures} is not a "
                          "cross-encoder (a ...ForSequenceClassification with one label)")
    labels = config.get("id2label")
    count = len(labels) if isinstance(labels, dict) else config.get("num_labels", 2)
    if count != 1:
        raise GardenError(f"{folder.where}: {folder.file('config.json')}: id2label holds {count} labels; a "
                          "cross-encoder here gives one relevance score a pair")


def logistic(logits: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-z) in float64, without overflow for a large negative z."""
    z = np.asarray(logits, dtype=np.float64)
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


def load_cross_encoder(folder: ModelFolder):
    """The CrossEncoder in a checked folder, offline, from safetensors, no code of its own;
    loaded once per process (a folder changed on disk is another model)."""
    def load():
        quiet_transformers()
        import torch
        from sentence_transformers import CrossEncoder

        torch.manual_seed(0)
        try:
            return CrossEncoder(str(folder.path), device="cpu", model_kwargs={"use_safetensors": True},
                                **SAFE_LOADING)
        except Exception as exc:   # transformers and torch fail in types of their own
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            raise GardenError(f"{folder.where}: {folder.path}: cannot load the cross-encoder ({reason})") from None

    return MODELS.get((str(folder.path), folder.digest), load)


class CrossScores(RetrieverBase):
    """The cross-encoder as a member: its scores of a query are its reranker's."""

    kind = SEMANTIC

    def __init__(self, reranker: "CrossReranker"):
        self.name = JUDGE
        self._reranker = reranker

    def index(self, docs: Sequence[Doc]) -> None:
        """Nothing: the reranker indexes its base and keeps the texts."""

    def score(self, query: str) -> dict[str, float]:
        return self._reranker.judged(query)

    def load_model(self, queries: Sequence[str] | None = None) -> None:
        load_cross_encoder(self._reranker.folder)

    def ceiling(self, query: str) -> float:
        return 1.0


@register("cross", "a cross-encoder folder (model=DIR) reranking a base retriever's best records "
          f"(base=bm25s, depth={DEPTH})")
class CrossReranker(RetrieverBase):
    kind = FUSION
    in_contrast = False   # it needs a model folder: named where wanted, not a column of the contrast matrix
    MAKES_MEMBERS = True  # the registry that makes it passes itself: the base comes from the same one
    OPTIONS = {"model": custom(MODEL_WORDS, folder_option, folder_option), "base": custom(BASE_WORDS, _base, _base),
               "depth": integer(1), "batch_size": integer(1),
               "options": custom("the base's options, a mapping (from Python only)", _no_text, _base_options)}

    def __init__(self, model: str | None = None, base: str = "bm25s", depth: int = DEPTH,
                 batch_size: int = BATCH_SIZE, options: Mapping | None = None, registry=None):
        if model is None:
            raise GardenError(f"retriever cross: option model is required: {MODEL_WORDS} (cross:model=DIR)")
        self.name = "cross"
        self.folder = model_folder(model, f"cross:model={model}")   # refused now, in one located line
        check_cross_encoder(self.folder)
        self.depth, self.batch_size = int(depth), int(batch_size)
        make = registry.make if registry is not None else make_retriever
        self.base = make(base, **dict(options or {}))
        if JUDGE in self.base.members():
            raise GardenError(f"retriever cross: base {base} has a member named {JUDGE}, the cross-encoder's name")
        self.judge = CrossScores(self)
        self.texts: dict[str, str] = {}
        self._last: tuple[str, dict[str, float]] | None = None

    def members(self) -> dict[str, RetrieverBase]:
        """The cross-encoder, then the base's members."""
        return {JUDGE: self.judge, **self.base.members()}

    @property
    def persist(self) -> bool:
        return self.base.persist

    def index(self, docs: Sequence[Doc]) -> None:
        self.base.index(docs)
        self.texts = {d.id: d.text for d in docs}
        self._last = None

    def state(self) -> State | None:
        """The base's state: the texts come from the documents, the model from its folder."""
        if not self.persist:
            return None
        state = State(meta={"model": self.folder.label})
        state.nest("base", self.base.state())
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        if state.meta.get("model") != self.folder.label:
            raise ValueError("saved for another cross-encoder")
        self.base.load_state(state.inner("base"), docs)
        self.texts = {d.id: d.text for d in docs}
        self._last = None

    def _rerank(self, query: str, candidates: Sequence[tuple[str, float]]) -> dict[str, float]:
        """The cross-encoder's score of each candidate (the base's best, in its order)."""
        if not candidates or not query.strip():
            return {}
        ids = [rid for rid, _ in candidates]
        logits = load_cross_encoder(self.folder).predict(
            [(query, self.texts.get(rid, "")) for rid in ids], batch_size=self.batch_size,
            activation_fn=_identity(), convert_to_numpy=True, show_progress_bar=False)
        return dict(zip(ids, logistic(np.asarray(logits).reshape(len(ids))).tolist()))

    def judged(self, query: str) -> dict[str, float]:
        """The cross-encoder's scores of the base's best `depth` records for `query` (the
        last query's kept: a pipeline reads them twice)."""
        if self._last is None or self._last[0] != query:
            self._last = (query, self._rerank(query, self.base.top(query, self.depth)))
        return self._last[1]

    def components(self, query: str, eligible=None, depth: int | None = None) -> dict[str, Mapping[str, float]]:
        """The cross-encoder's scores (`cross`), then the base's members' raw scores."""
        return {JUDGE: self.judged(query), **self.base.components(query)}

    def fuse(self, components: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """The reranked records' cross-encoder scores: the ranking is the cross-encoder's."""
        return dict(components[JUDGE])

    def score(self, query: str) -> dict[str, float]:
        return self.judged(query)

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        """Each query's reranked list, best first, ties by id: the base's best `depth` of
        each through its own batch path, then the cross-encoder."""
        queries = list(queries)
        candidates = self.base.top_many(queries, self.depth)
        return [rank(self._rerank(q, c) if q.strip() else {}, k) for q, c in zip(queries, candidates)]

    def ceiling(self, query: str) -> float:
        """1.0: a score is a logistic."""
        return 1.0


def _identity():
    import torch

    return torch.nn.Identity()   # the raw logit: the logistic is taken here, in float64
