"""One normalization for every member retriever, and the label of weak evidence, by kind.

Raw scores are not comparable across retrievers (a BM25 sum, a cosine, a reciprocal-rank
sum), so a pipeline that adds them up first puts each on [0, 1] by what it is evidence
of, read from the member's `kind`, never from its name:

- lexical (and fusion): the member's score on the query's content words divided by its
  ceiling for those words, s(d, c) / ceiling(c): the fraction of the best match possible
  for the query rather than of the best match the store happens to hold (the
  saturation-normalized BM25 score of the pi-canon 0.2.0 readme). 0 when the ceiling is 0
  (an empty index). A retriever whose scores can be negative (`bm25:idf=okapi`) keeps
  the sign.
- semantic: the cosine on the whole query above `semantic_floor`, rescaled to [0, 1]:
  max(0, s(d, q) - floor) / (1 - floor). A cosine at or below the floor is no evidence:
  the embeddings of unrelated texts seldom meet at a cosine of 0 or below.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from garden.errors import GardenError
from garden.retrievers._protocol import SEMANTIC, Retriever, as_retriever
from garden.retrievers._scores import ArrayScores, check_finite

LEXICAL_ONLY = "lexical_only"
SEMANTIC_ONLY = "semantic_only"


def is_semantic(retriever: Retriever) -> bool:
    """True for a retriever whose scores are embedding similarities (`kind == "semantic"`)."""
    return retriever.kind == SEMANTIC


def lexical_relevance(scores: Mapping[str, float], ceiling: float) -> dict[str, float]:
    """s / ceiling for every scored document; nothing when the ceiling is not positive.
    No checks: `relevance` makes them."""
    if ceiling <= 0:
        return {}
    if isinstance(scores, ArrayScores):
        return scores.derived(scores.array / ceiling, scores.array != 0)
    return {rid: s / ceiling for rid, s in scores.items() if s != 0}


def semantic_relevance(scores: Mapping[str, float], semantic_floor: float) -> dict[str, float]:
    """max(0, s - floor) / (1 - floor), only the documents above the floor. No checks:
    `relevance` makes them."""
    scale = 1 - semantic_floor
    if isinstance(scores, ArrayScores):
        return scores.derived((scores.array - semantic_floor) / scale, scores.array > semantic_floor)
    return {rid: (s - semantic_floor) / scale for rid, s in scores.items() if s > semantic_floor}


def check_floor(semantic_floor: Any) -> float:
    """The floor as a float, or GardenError: a finite number from 0 to below 1 (at 1 the
    rescaling divides by zero), the range of the pipeline setting."""
    if (isinstance(semantic_floor, bool) or not isinstance(semantic_floor, (int, float))
            or not math.isfinite(semantic_floor) or not 0 <= semantic_floor < 1):
        raise GardenError(f"semantic_floor must be a finite number from 0 to below 1 (got {semantic_floor!r})")
    return float(semantic_floor)


def relevance(member: Retriever, query: str, content_query: str, semantic_floor: float,
              scores_of_query: Mapping[str, float] | None = None, ids: Sequence[str] | None = None
              ) -> dict[str, float]:
    """Document id -> the member's normalized relevance (see the module docstring): a
    semantic member's cosine on `query` above `semantic_floor`, rescaled,
    max(0, s - floor) / (1 - floor); any other member's score on `content_query` divided
    by its ceiling for it, s / ceiling. A document left out has relevance 0.
    `scores_of_query`: the member's scores of `query` when the caller has them (a semantic
    member's relevance is read off them instead of scoring again). `ids`: the records the
    caller reads; a `top_only` member is asked for their scores alone (`scores_of`),
    not for a search of every record. GardenError for a floor
    out of range, a score or a ceiling that is not a finite number."""
    floor = check_floor(semantic_floor)
    member = as_retriever(member)
    if member.kind == SEMANTIC:
        scores = member.score(query) if scores_of_query is None else scores_of_query
        check_finite(member.name, scores)
        return semantic_relevance(scores, floor)
    scores = (member.scores_of(content_query, ids) if ids is not None and member.top_only
              else member.score(content_query))
    check_finite(member.name, scores)
    ceiling = member.ceiling(content_query)
    if not isinstance(ceiling, (int, float)) or not math.isfinite(ceiling):
        raise GardenError(f"retriever {member.name}: its ceiling for {content_query!r} is {ceiling!r}, "
                          "which is not a finite number")
    return lexical_relevance(scores, ceiling)


def evidence_kind(scores_by_member: Mapping[str, float], members: Mapping[str, Retriever]) -> str:
    """`lexical_only` when some member that is not semantic gives the item a positive
    score, else `semantic_only`: the label of an item nothing stronger supports.
    `scores_by_member` is one item's raw score from each member (a key of `members`)."""
    if not members.keys() >= scores_by_member.keys():
        unknown = [name for name in scores_by_member if name not in members]
        raise GardenError(f"scores of {', '.join(map(repr, unknown))}, which is not a member "
                          f"({', '.join(members) or 'none'})")
    for name, value in scores_by_member.items():   # a loop, not any(): asked of every candidate
        if value > 0 and members[name].kind != SEMANTIC:
            return LEXICAL_ONLY
    return SEMANTIC_ONLY
