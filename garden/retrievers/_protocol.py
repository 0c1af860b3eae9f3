"""The retriever protocol: what every retriever is and can do, declared in one place.

Every retriever has a `name`, a `kind` and two methods of its own, `index(docs)` and
`score(query)` (larger is better; a document with no evidence at all may be left out of
the mapping). Everything else a pipeline or an evaluation asks of a retriever is a
declared member with a default in `RetrieverBase`, so no caller probes for it:

    score_many(queries)      each query's `score`; default: `score` of each in turn
    top(query, k=None)       `rank(score(query), k)`; default: through `top_many`
    top_many(queries, k)     each query's `top`; default: `rank` of each of `score_many`
    members()                name -> retriever whose raw scores this one is made of;
                             default: {name: self}, a retriever is its own only member
    components(query)        each member's raw scores for `query`, by member name
    top_only                 whether, given a pipeline's candidate depth
                             (`components(query, depth=N)`), its scores of a query are
                             those of its best N records alone (a search engine's top:
                             the Milvus members); default False, every record is scored
    scores_of(query, ids)    its scores of the records `ids`: what a pipeline reads of a
                             candidate a top-only retriever did not return; default: read
                             off `score(query)`
    fuse(components)         this retriever's scores from its members'; default: its only
                             member's scores, unchanged
    ceiling(query)           the best score any document could reach for `query`
    pushes_down              whether it filters by the hard eligibility rules itself; default
                             False. One that does is given each record's `RecordFields`
                             (`describe_records`) before `index`, and a query's `Eligible`
                             (`components(query, eligible)`); the eligibility check re-checks all it gives

`kind` says what a score is evidence of: `lexical` (words shared with the query), `semantic`
(similarity of embeddings: a cosine, at most 1) or `fusion` (made from other retrievers'
rankings; `members()` names them). A pipeline reads it, never a retriever's name, to
normalize each member and to label an item that only one kind of evidence supports (see
`relevance` and `evidence_kind`).

A third-party retriever may declare no more than `name`, `index` and `score`
(`BasicRetriever`). `as_retriever` gives it the rest by wrapping it in a `PluginRetriever`,
which keeps the plugin's own `score_many`, `top_many`, `top` and `ceiling` where it has
them and reads an optional `kind` attribute ("lexical" when absent). A plugin that wants
to fuse other retrievers subclasses `RetrieverBase` instead, as `hybrid` does.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

from garden._state import State
from garden.errors import GardenError
from garden.retrievers._scores import check_depth, rank

LEXICAL = "lexical"
SEMANTIC = "semantic"
FUSION = "fusion"
KINDS = (LEXICAL, SEMANTIC, FUSION)
PLUGIN_KINDS = (LEXICAL, SEMANTIC)  # a fusing plugin declares its members: it subclasses RetrieverBase


class Doc(NamedTuple):
    id: str
    text: str


NEVER = 10**7  # a day ordinal past every date (date.max is 3,652,059): "no end"


class RecordFields(NamedTuple):
    """What the hard eligibility rules read of a record, for a retriever that filters by them
    (`pushes_down`): its kind, project and privacy, and, as day ordinals
    (`date.toordinal()`), the day it appears (0: always there) and the days it is live,
    `live_from <= as_of < live_until` (a state's validity, cut at the day its successor
    appears; 0 to NEVER for any other record). `garden.rerank.timeline.record_fields`
    makes them from a story, by the same rules as the eligibility check."""
    kind: str = "source"
    project: str = ""
    private: bool = False
    appeared: int = 0
    live_from: int = 0
    live_until: int = NEVER


class Eligible(NamedTuple):
    """What a query's hard rules depend on: its `as_of` and whether private records may
    be served. A record passes when it is not private (or `include_private`), has appeared
    by `as_of` and is live on it."""
    as_of: Any  # datetime.date
    include_private: bool = False

    def admits(self, fields: RecordFields) -> bool:
        day = self.as_of.toordinal()
        return ((self.include_private or not fields.private) and fields.appeared <= day
                and fields.live_from <= day < fields.live_until)


@runtime_checkable
class BasicRetriever(Protocol):
    """The least a plugin declares: `as_retriever` supplies everything else."""

    name: str

    def index(self, docs: Sequence[Doc]) -> None: ...

    def score(self, query: str) -> dict[str, float]: ...


@runtime_checkable
class Retriever(Protocol):
    """Everything a caller may ask of a retriever; `RetrieverBase` implements it."""

    name: str
    kind: str

    def index(self, docs: Sequence[Doc]) -> None: ...

    def score(self, query: str) -> dict[str, float]: ...

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]: ...

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]: ...

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]: ...

    def members(self) -> dict[str, Retriever]: ...

    def components(self, query: str, eligible: Eligible | None = None,
                   depth: int | None = None) -> dict[str, dict[str, float]]: ...

    def scores_of(self, query: str, ids: Sequence[str], eligible: Eligible | None = None) -> dict[str, float]: ...

    def fuse(self, components: Mapping[str, Mapping[str, float]]) -> dict[str, float]: ...

    def ceiling(self, query: str) -> float: ...


class RetrieverBase(abc.ABC):
    """The protocol with its defaults: a subclass sets `name` and `kind` and writes `index`
    and `score`; it overrides any other member it can do better (a batched `score_many`,
    a `top_many` that ranks an array, the `ceiling` its scoring formula allows)."""

    name: str
    kind: str = LEXICAL
    # a column of `garden contrast`'s matrix; False for a retriever that moves an existing one
    # to another engine (the Milvus members): named like any other, it is not a baseline
    # of its own, and the matrix does not stand up an engine to say what it already says
    in_contrast: bool = True
    # given the candidate depth a pipeline reads (`components(query, depth=N)`), a top-only
    # retriever scores its best N records alone, and `scores_of` gives any other's
    top_only: bool = False

    @abc.abstractmethod
    def index(self, docs: Sequence[Doc]) -> None:
        """Index `docs`, replacing whatever was indexed before."""

    def state(self) -> State | None:
        """What a save of this index holds (arrays and JSON-able meta: `garden._state`),
        or None, the default: not saved, built again in every process. A retriever that
        gives a state is saved under the garden home once built and taken back with
        `load_state` in a later process (garden.pipelines.indexes)."""
        return None

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        """Become the index `state()` gave, on a retriever made with the same options, for
        the same `docs` (what the save left out, such as `dense`'s embeddings, is taken
        back from its own cache). ValueError when `state` is not such an index."""
        raise NotImplementedError(f"retriever {self.name} saves no state")

    @property
    def persist(self) -> bool:
        """Whether its index is saved: it gives a `state`."""
        return type(self).state is not RetrieverBase.state

    @abc.abstractmethod
    def score(self, query: str) -> dict[str, float]:
        """Document id -> score for `query`, larger is better."""

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        return [self.score(q) for q in queries]

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        """`rank(self.score(query), k)`."""
        return self.top_many([query], k)[0]

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        """Each query's best `k` (every scored document when None), ties by id."""
        check_depth(k)
        return [rank(scores, k) for scores in self.score_many(queries)]

    def members(self) -> dict[str, RetrieverBase]:
        """The retrievers whose raw scores this one is made of, by name: itself alone
        unless it fuses others."""
        return {self.name: self}

    def components(self, query: str, eligible: Eligible | None = None,
                   depth: int | None = None) -> dict[str, dict[str, float]]:
        """Each member's raw scores for `query`, by member name, each member scored once.
        `eligible` is given only to a retriever that `pushes_down`, `depth` (the most
        candidates the caller reads) only to one that is `top_only`; others ignore them."""
        return {name: member.score(query) for name, member in self.members().items()}

    def scores_of(self, query: str, ids: Sequence[str], eligible: Eligible | None = None) -> dict[str, float]:
        """Its scores of the records `ids` for `query`, those it scores at all: what a
        pipeline reads of a candidate that a `top_only` retriever did not return
        (`eligible`, given only when it `pushes_down`: of the records the rules admit). By
        default read off `score(query)`."""
        scores = self.score(query)
        return {rid: scores[rid] for rid in ids if rid in scores}

    @property
    def pushes_down(self) -> bool:
        """Whether it leaves out, by itself, the records a query's hard rules exclude
        (`Eligible`): False by default, every record is scored and the eligibility check rejects."""
        return False

    def describe_records(self, fields: Mapping[str, RecordFields]) -> None:
        """Take each record's fields before `index`; only called when `pushes_down`."""
        raise NotImplementedError(f"retriever {self.name} does not filter by record fields")

    def fuse(self, components: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """This retriever's scores from `components`: a retriever that fuses nothing
        returns its own member's scores unchanged."""
        if self.name not in components:
            raise GardenError(f"retriever {self.name}: no scores of its own among the components "
                              f"({', '.join(components) or 'none'})")
        return dict(components[self.name])

    def ceiling(self, query: str) -> float:
        """The best score any document could reach for `query`. By default 1.0: a cosine
        (a semantic retriever's score) is at most 1; a retriever whose scores can exceed 1
        overrides this with the bound its formula gives, as `bm25` and `bm25s` do."""
        return 1.0


_OWN = ("score_many", "top", "top_many", "ceiling")  # what a plugin may bring of its own


class PluginRetriever(RetrieverBase):
    """A retriever that declares only `name`, `index` and `score` (and perhaps `kind`),
    given every member of the protocol. Its own `score_many`, `top`, `top_many` and
    `ceiling`, where it has them, are used; the defaults fill the rest. A plugin with no
    `ceiling` is taken to score on [0, 1] already (`RetrieverBase.ceiling`). The wrapped
    object stays reachable as `plugin`."""


    def __init__(self, plugin: Any, name: str, kind: str):
        self.plugin = plugin
        self.name = name
        self.kind = kind
        self._own = {m: f for m in _OWN if callable(f := getattr(plugin, m, None))}

    def index(self, docs: Sequence[Doc]) -> None:
        self.plugin.index(docs)

    def score(self, query: str) -> dict[str, float]:
        return self.plugin.score(query)

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        own = self._own.get("score_many")
        return own(list(queries)) if own else super().score_many(queries)

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        own = self._own.get("top")
        if own is None:
            return super().top(query, k)
        check_depth(k)
        return own(query, k)

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        own = self._own.get("top_many")
        if own is None:
            return super().top_many(queries, k)
        check_depth(k)
        return own(list(queries), k)

    def ceiling(self, query: str) -> float:
        own = self._own.get("ceiling")
        return float(own(query)) if own else super().ceiling(query)


def load_models(retriever: Any, queries: Sequence[str] | None = None) -> None:
    """Load now any model the retriever, or a member of its fusion, loads only when it first
    encodes a text (`dense`): a timing that follows then measures queries alone. Given the
    `queries` the timing will ask, a model none of them needs (their vectors are kept) is
    left unloaded."""
    for member in as_retriever(retriever).members().values():
        load = getattr(member, "load_model", None)
        if callable(load):
            load() if queries is None else load(queries)


def as_retriever(obj: Any, name: str | None = None) -> RetrieverBase:
    """`obj` as a full retriever: a `RetrieverBase` as it is, anything else with `name`,
    `index` and `score` wrapped in a `PluginRetriever` (named `name` when given: the name
    it was made by, so its scores are keyed the same bare or as a hybrid member). Calling
    it on a retriever already checked costs one isinstance. GardenError, one line per
    problem, for an object that is not a retriever or declares a kind it cannot be."""
    if isinstance(obj, RetrieverBase):
        if obj.kind not in KINDS:
            raise GardenError(f"retriever {obj.name}: kind must be one of {', '.join(KINDS)} (got {obj.kind!r})")
        return obj
    label = name or getattr(obj, "name", None) or type(obj).__name__
    problems = [f"retriever {label}: {type(obj).__name__} has no {method} method; a retriever needs "
                "name, index(docs) and score(query)"
                for method in ("index", "score") if not callable(getattr(obj, method, None))]
    own_name = getattr(obj, "name", None)
    if name is None and not (isinstance(own_name, str) and own_name):
        problems.append(f"retriever {label}: {type(obj).__name__} has no name (a non-empty string)")
    kind = getattr(obj, "kind", LEXICAL)
    if kind not in PLUGIN_KINDS:
        problems.append(f"retriever {label}: kind must be one of {', '.join(PLUGIN_KINDS)} (got {kind!r}); "
                        "a retriever that fuses others subclasses garden.retrievers.RetrieverBase")
    if problems:
        raise GardenError(problems)
    return PluginRetriever(obj, name or own_name, kind)
