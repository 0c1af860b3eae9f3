"""`hybrid`: reciprocal-rank fusion of any registered retrievers.

Cormack, Clarke & Buettcher (2009), "Reciprocal rank fusion outperforms Condorcet and
individual rank learning methods": each member ranks the documents (best first, ties by
id, at most `depth` of them) and a document scores sum over members of 1 / (k + rank),
rank counted from 1. Only ranks are fused, so members whose scores live on different
scales (BM25 sums, cosines) need no calibration; k = 60 damps the weight of the very top.
Its kind is `fusion`: `members()` gives the member retrievers, `components` their raw
scores and `fuse` the fused ones, so a pipeline can normalize each member by its own kind.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from garden.errors import GardenError
from garden.retrievers import (FUSION, ArrayScores, Doc, RetrieverBase, State, custom, integer, make_retriever, number,
                               rank, register)

MEMBER_WORDS = "retriever names joined by + or , (say bm25+dense), at least one"


def _members(value) -> tuple[str, ...]:
    """Names as text (`bm25+dense`; `+` because a comma also splits a list of pipelines)
    or as a sequence of names."""
    names = value.replace("+", ",").split(",") if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError("not a list of names")
    return tuple(n.strip() for n in names)


def _no_text(text: str):
    raise ValueError("a mapping cannot be written in a spec")


def _member_options(value) -> dict:
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise ValueError("not a mapping of mappings")
    return {str(k): dict(v) for k, v in value.items()}


def rrf(rankings: Sequence[Sequence[tuple[str, float]]], k: float = 60.0,
        weights: Sequence[float] | None = None) -> dict[str, float]:
    """Fused scores of already ranked lists (best first): sum over lists of
    weight / (k + rank), each list's weight 1 unless `weights` gives one per list."""
    fused: dict[str, float] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for position, (doc_id, _) in enumerate(ranking, 1):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k + position)
    return fused


def rrf_arrays(scores: Sequence[ArrayScores], k: float, depth: int) -> ArrayScores:
    """`rrf` of each one's ranking to `depth`, on arrays: scores over the same ids, added
    list by list in the same order as `rrf` adds them, so every value is the same float,
    and kept where some ranking reaches (the keys `rrf` gives)."""
    first = scores[0]
    fused = np.zeros(len(first.array), dtype=np.float64)
    kept = np.zeros(len(first.array), dtype=bool)
    for one in scores:
        positions = one.ranked_positions(depth)
        fused[positions] += 1.0 / (k + np.arange(1, len(positions) + 1, dtype=np.float64))
        kept[positions] = True
    return ArrayScores(first.docs, fused, kept)


@register("hybrid", "reciprocal-rank fusion (k=60) of named retrievers, bm25 and dense by default")
class HybridRetriever(RetrieverBase):
    kind = FUSION
    # Cormack et al. (2009) use k = 60; any finite k > 0 keeps 1 / (k + rank) finite and
    # decreasing. make_retriever checks these; each member's own options are checked when
    # the member is made. What spans options (a name twice, options for a non-member) is
    # checked below.
    OPTIONS = {"retrievers": custom(MEMBER_WORDS, _members, _members), "k": number(0, above=True),
               "depth": integer(1),
               "options": custom("a mapping of member name to its options (from Python only)",
                                 _no_text, _member_options)}

    MAKES_MEMBERS = True  # the registry that makes it passes itself: members come from the same one

    def __init__(self, retrievers: Sequence[str] | str = ("bm25", "dense"), k: float = 60.0,
                 depth: int = 1000, options: Mapping[str, Mapping] | None = None, registry=None):
        names = list(_members(retrievers))
        if len(set(names)) != len(names):
            raise GardenError(f"retriever hybrid: option retrievers names a retriever twice: {', '.join(names)}")
        options = dict(options or {})
        unknown = set(options) - set(names)
        if unknown:
            raise GardenError(f"retriever hybrid: option options names {', '.join(sorted(unknown))}, "
                              f"which is not a member ({', '.join(names)})")
        self.name = "hybrid"
        self.k, self.depth = float(k), int(depth)
        make = registry.make if registry is not None else make_retriever
        self._members = {n: make(n, **dict(options.get(n, {}))) for n in names}

    def members(self) -> dict[str, RetrieverBase]:
        """The member retrievers by the names they were made by, in the order given."""
        return dict(self._members)

    @property
    def persist(self) -> bool:
        return all(m.persist for m in self._members.values())

    def index(self, docs: Sequence[Doc]) -> None:
        for member in self._members.values():
            member.index(docs)

    def state(self) -> State | None:
        """Each member's state, by its place among the members (a name may hold a dot);
        None when a member saves none."""
        if not self.persist:
            return None
        state = State()
        for place, member in enumerate(self._members.values()):
            state.nest(f"member{place}", member.state())
        return state

    def load_state(self, state: State, docs: Sequence[Doc]) -> None:
        for place, member in enumerate(self._members.values()):
            member.load_state(state.inner(f"member{place}"), docs)

    @property
    def pushes_down(self) -> bool:
        """True when every member filters by the hard rules itself."""
        return all(m.pushes_down for m in self._members.values())

    def describe_records(self, fields) -> None:
        for member in self._members.values():
            member.describe_records(fields)

    @property
    def top_only(self) -> bool:
        """True when a member scores its best records alone (given the candidate depth)."""
        return any(m.top_only for m in self._members.values())

    def components(self, query: str, eligible=None, depth: int | None = None) -> dict[str, dict[str, float]]:
        """Each member's raw scores for `query`; when every member pushes down, each is told
        `eligible`; a top-only member is told `depth`, and ranks its best `depth` alone."""
        told = eligible if eligible is not None and self.pushes_down else None
        return {name: self.component(member, query, told, depth) for name, member in self._members.items()}

    @staticmethod
    def component(member: RetrieverBase, query: str, told=None, depth: int | None = None) -> dict[str, float]:
        """One member's raw scores for `query`, as `components` asks it: told the hard
        rules (`told`) or the candidate depth when it takes them, else every score."""
        if told is None and (depth is None or not member.top_only):
            return member.score(query)
        extra = {"depth": depth} if depth is not None and member.top_only else {}
        return member.components(query, told, **extra)[member.name]

    def fuse(self, components: Mapping[str, Mapping[str, float]]) -> Mapping[str, float]:
        """RRF of each member's ranking of its scores, to `depth`."""
        scores = list(components.values())
        if scores and all(isinstance(s, ArrayScores) for s in scores) \
                and all(scores[0].docs.same_ids(s.docs) for s in scores[1:]):
            return rrf_arrays(scores, self.k, self.depth)
        return rrf([rank(s, self.depth) for s in scores], self.k)

    def ceiling(self, query: str) -> float:
        """The best fused score possible: ranked first by every member, n / (k + 1)."""
        return len(self._members) / (self.k + 1)

    def score(self, query: str) -> dict[str, float]:
        return self.fuse(self.components(query))

    def _member_rankings(self, queries: list[str]) -> list[list]:
        """Per member, each query's ranking to `depth` through the member's `top_many`
        (a ranked batch where the member has one: the same lists `rank` makes of its
        scores, without building and sorting a dict of every document)."""
        return [member.top_many(queries, self.depth) for member in self._members.values()]

    def score_many(self, queries: Sequence[str]) -> list[dict[str, float]]:
        """`score` of every query, fused from the members' rankings directly: the batch
        path for whole runs; `components` is there when the raw scores are wanted."""
        queries = list(queries)
        ranked = self._member_rankings(queries)
        return [rrf([member[i] for member in ranked], self.k) for i in range(len(queries))]
