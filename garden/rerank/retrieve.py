"""The retrieve stage: the base retriever's best candidates, plus every record the query
anchors (a resolved topic or entity, an id it names), each through the eligibility check.

A candidate's rank score starts as its relevance: each lexical member's score on the
query's content words as a fraction of the best score possible for them (the member's
ceiling), plus each semantic member's cosine above `semantic_floor`, rescaled to [0, 1]
and weighed by `semantic_weight` (0.5: on LoCoMo the embedding member is the weaker
evidence, and counting it in full lowers every figure; see docs/figures.md, "LoCoMo").
"""
from __future__ import annotations


from typing import Mapping

from garden.analyzer import without_function_words
from garden.rerank.candidates import Candidate
from garden.rerank.context import Setting, QueryContext, StageBase
from garden.retrievers import Eligible, is_semantic, member_scores, rank, relevance, scored

CANDIDATES = Setting("candidates", int, 50, "retriever candidates considered per query "
                     "(experiments/locomo_weights.py)", ge=1)
SEMANTIC_FLOOR = Setting("semantic_floor", float, 0.35, "a MiniLM cosine at or below this is no evidence", ge=0, lt=1)
# chosen by leave-one-conversation-out on LoCoMo (experiments/locomo_weights.py)
SEMANTIC_WEIGHT = Setting("semantic_weight", float, 0.5,
                          "what a semantic member's relevance counts beside a lexical one's", ge=0)


class Retrieve(StageBase, name="retrieve", settings=(CANDIDATES, SEMANTIC_FLOOR, SEMANTIC_WEIGHT), essential=True,
               mode="retrieves", writes=("candidates",), title="Retrieve: the base retriever's candidates",
               drawn=("the base retriever's best candidates and the records the query anchors, scored by normalized "
                      "relevance"),
               step="entry"):
    def run(self, ctx: QueryContext) -> None:
        spec, res, settings = ctx.spec, ctx.resolution, ctx.settings
        story, retriever = spec.story, ctx.retriever
        anchored = {rid for field, names in (("topics", res.topics), ("entities", res.entities))
                    for name in names for rid in story.holders(field).get(name, ())}
        anchored |= {rid for rid in res.explicit_ids if story.kinds.get(rid, "control") != "control"}
        ids, raw, relevant = searched(ctx, spec.query, settings.candidates, sorted(anchored))
        explicit = set(res.explicit_ids)
        semantic = {name: is_semantic(m) for name, m in retriever.members().items()}
        by_id = story.records_of(ids)  # one read where the records live in Milvus
        for n, rid in enumerate(ids):
            if rid in ctx.candidates:
                continue
            c = Candidate(by_id[rid], raw[n])
            c.score = total_relevance(relevant[n], semantic, c, settings.semantic_weight)
            if c.score > 0 or rid in anchored:
                ctx.candidates[rid] = c
                if rid in explicit:
                    c.why.append("named by id in the query")
                ctx.admit(c.record, "retriever", certain=rid in explicit)
        for rid in res.explicit_ids:  # a control record is never indexed: the eligibility check names it
            if rid not in ctx.candidates:
                ctx.admit(story.by_id[rid], "retriever", certain=True)


def searched(ctx: QueryContext, text: str, depth: int, anchored: list[str] = ()) -> tuple[list[str], list, list]:
    """The base retriever's best `depth` records for `text` (then `anchored`), each
    member's raw score and its normalized relevance for each (`member_scores`' rows): what
    the retrieve stage reads for the query, and the gather stage for each of its facets."""
    spec, settings, retriever = ctx.spec, ctx.settings, ctx.retriever
    # a retriever that filters by the hard rules itself (`pushes_down`) is told them; what
    # it gives still passes the eligibility check
    eligible = Eligible(spec.as_of, spec.include_private)
    # a top-only retriever (Milvus) returns its best `depth` alone; the scores of any other
    # record read here are asked of it by id (`completed`)
    fused, members = scored(retriever, text, eligible=eligible, depth=depth)
    ids = [rid for rid, s in rank(fused, depth) if s > 0] + list(anchored)
    content = without_function_words(text)
    parts = retriever.members()
    if retriever.top_only:
        members = completed(parts, members, text, ids, eligible if retriever.pushes_down else None)
    # a semantic member's relevance is read off the scores just given (with a filter
    # pushed down, asking again would be a search without it)
    normalized = {n: relevance(m, text, content, settings.semantic_floor, members.get(n), ids)
                  for n, m in parts.items()}
    return ids, member_scores(members, ids), member_scores(normalized, ids)


def completed(parts: dict, members: dict[str, Mapping[str, float]], query: str, ids: list[str],
              eligible: Eligible | None) -> dict[str, Mapping[str, float]]:
    """Each top-only member's scores with those of `ids` it did not return added
    (`scores_of`): a candidate another member or the story's structure brought still
    carries every member's score, as it would if every record had been scored."""
    out = dict(members)
    for name, member in parts.items():
        if member.top_only:
            given = members.get(name, {})
            missing = [rid for rid in ids if rid not in given]
            if missing:
                out[name] = {**given, **member.scores_of(query, missing, eligible)}
    return out


def relevance_sum(relevant: dict[str, float], semantic: dict[str, bool], members,
                  semantic_weight: float = 1.0) -> float:
    """The sum over `members` (names) of each one's normalized relevance (`relevant`, by
    member name), a semantic member's (`semantic[name]`) times `semantic_weight`."""
    return sum(relevant.get(name, 0.0) * (semantic_weight if semantic[name] else 1.0) for name in members)


def total_relevance(relevant: dict[str, float], semantic: dict[str, bool], c: Candidate,
                    semantic_weight: float = 1.0) -> float:
    """`relevance_sum` over the candidate's members, each member that counts named in `why`."""
    for name in c.scores:
        value = relevant.get(name, 0.0)
        if value > 0:
            c.why.append(f"{name} cosine {c.scores[name]:.3f}" if semantic[name]
                         else f"{name} {value:.3f} of the query's best possible match")
    return relevance_sum(relevant, semantic, c.scores, semantic_weight)
