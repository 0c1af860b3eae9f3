"""A test collection ranked by a structured pipeline (`default`, `default-phrase`, ...).

A structured pipeline answers a query with a budgeted packet; an ad-hoc collection (TREC,
BEIR) asks for a ranking to a depth (1000), judged by its qrels. To rank one, the
collection becomes a story and each query a QuerySpec, and the pipeline runs its stages up
to the point where a ranking exists, not to a packet:

- The story: one `source` record per document, its text and nothing else. A collection
  carries no topics, entities, dates, privacy or supersession, so none is invented. Record
  ids are the ranking's own (`d` and a zero-padded number), numbered in the sorted order
  of the document ids, so every tie is broken as the bare retrievers break it (by document
  id), and mapped back to document ids in the ranking. The records keep the collection's
  order: an index's rows in another order can round a score differently in the last bit.
- `as_of` is fixed at 9999-12-31, the latest date there is: the documents have no dates,
  and the judgments were made with every document in view, so none may be hidden as
  "not yet observed".
- A collection query is not scanned for record ids: a collection's ids are its own
  bookkeeping, not names its queries use (scanning 11,429 ids per query would also cost
  about a second a query). Topics and entities resolve as usual, against the story's
  (none, for a TREC or BEIR collection).
- Triage runs and its verdict is kept, but an ASK or a SKIP does not silence the query: an
  ad-hoc query is a request to rank the collection, and the task has no empty answer
  (an empty ranking scores 0 on every metric, as ``trec_eval -c`` counts it).
- The retrieve stage runs with `candidates` raised to the depth, and then every record of
  the base retriever's top `depth` is admitted through the eligibility check: the retrieve stage keeps
  only candidates whose normalized relevance is above 0, a floor for packets, while in a
  ranking the base retriever's rank is itself the evidence (without this, 88 of hybrid's
  top 1000 per Vaswani query are lost and R@1000 falls from 0.9636 to 0.9566).
- Later stages run in order until the first stage that only selects a packet from a
  ranking (`PACKET_STAGES`: standout, decide, fill, lanes, provenance, pack).

The ordering (`Ranked.ordered`) is the base retriever's order, moved only by the bonuses of
the stages in `MOVED_BY`: the structure stage's, awarded for topics and entities the query
resolved and a record carries, evidence the base retriever cannot see. The base score is
put on the scale the reranker's bonuses are sized for, where each member's evidence counts
up to 1 (`base_scale`). Nothing else reorders, so with no structural evidence (no topics,
no entities: every TREC or BEIR collection) the ranking is exactly the base retriever's,
and `default` cannot do worse than the retriever it stands on there, whatever the
collection. A rule that let text evidence reorder could promise that on no collection
without being judged on each one.

The text evidence the reranker has of its own was measured on Vaswani and not let in (the
figures are in docs/figures.md): its relevance score (normalized lexical scores plus
the cosine above the floor) ranks worse than the base's reciprocal-rank fusion, and the
phrase stage's bonus lowers AP whether it moves the base order or the reranker's. Both stay
measurable from the same run of the stages: `Ranked.by_relevance` is the reranker's own
order, `Ranked.ordered(depth, moved_by=("structure", "phrase"))` the base order moved by
phrase credit too. The phrase stage still runs in a ranking: its credit stays on the
candidates as labels and reasons, it only moves nothing.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Sequence

from garden.models import Hints, Record, Story
from garden.rerank.stages import Settings, resolved
from garden.pipelines.scoring import scored
from garden.rerank.context import QueryContext
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import resolve
from garden.rerank.stages import moved_by, packet_stages
from garden.retrievers import Doc, Eligible, as_retriever, rank

COLLECTION_AS_OF = dt.date.max
PACKET_STAGES = packet_stages()  # read off the stages' declared modes (garden/rerank/stages.py)
MOVED_BY = moved_by()

Ranking = list[tuple[str, float]]  # (id, score), best first


@dataclass
class CollectionStory:
    """A collection as a story of `source` records, and the way back to document ids."""

    story: Story
    doc_ids: dict[str, str]  # record id -> document id

    def spec(self, query: str, depth: int) -> QuerySpec:
        """The QuerySpec of one collection query: the fixed `as_of`, no hints, no session,
        and `candidates` raised to the ranking depth."""
        return QuerySpec(self.story, query, COLLECTION_AS_OF, settings=Settings(candidates=depth))


def collection_story(name: str, docs: Sequence[Doc]) -> CollectionStory:
    """The story of a collection named `name`: one `source` record per document."""
    width = len(str(len(docs)))
    place = {i: n for n, i in enumerate(sorted(range(len(docs)), key=lambda i: docs[i].id), 1)}
    records, doc_ids = [], {}
    for i, doc in enumerate(docs):  # in the collection's order, as the bare retrievers index it
        rid = f"d{place[i]:0{width}d}"
        doc_ids[rid] = doc.id
        records.append(Record(id=rid, kind="source", text=doc.text))
    return CollectionStory(Story(story=name, project=name, records=records), doc_ids)


def base_scale(retriever, query: str) -> float:
    """What multiplies the base retriever's score to put it on the reranker's scale, where
    each member's evidence counts up to 1 (a lexical member's fraction of its ceiling, a
    cosine above the floor, rescaled): the number of members over the base's ceiling. For
    hybrid, 2 / (2 / (k + 1)) = k + 1, so a record's base score is the sum over members of
    (k + 1) / (k + rank), 1 for a member's first. A ceiling that is not positive leaves the
    score as it is."""
    ceiling = retriever.ceiling(query)
    return len(retriever.members()) / ceiling if ceiling > 0 else 1.0


@dataclass
class Ranked:
    """One query's evidence for a ranking, from one run of the stages: the base score of
    each record the base retriever ranked, each live candidate's reranker score, and the
    bonus each stage awarded."""

    base: dict[str, float]                                 # record id -> base score, rescaled
    relevance: dict[str, float]                            # live candidate -> reranker score
    bonus: dict[str, dict[str, float]]                     # stage -> record id -> what it added
    live: set[str]                                         # candidates the eligibility check did not reject
    triage: str | None = None                              # what triage would have answered
    candidates: dict = field(default_factory=dict, repr=False)  # record id -> Candidate (labels, why)
    sittings: list = field(default_factory=list, repr=False)    # the sittings stage's ranking, best first

    def ordered(self, depth: int, moved_by: Sequence[str] = MOVED_BY) -> Ranking:
        """The rule: base order, moved only by the bonuses of the stages in `moved_by`.
        A live record the base did not rank and no such stage moved has no evidence under
        the rule and is left out."""
        scores = {}
        for rid in self.live:
            moved = sum(self.bonus.get(stage, {}).get(rid, 0.0) for stage in moved_by)
            if rid in self.base or moved > 0:
                scores[rid] = self.base.get(rid, 0.0) + moved
        return rank(scores, depth)

    def by_relevance(self, depth: int) -> Ranking:
        """The reranker's own order: the live candidates with a positive score, by the
        score the lanes would rank them by (relevance plus every bonus), as a packet is
        chosen; a record the base ranked that has no relevance of the reranker's is left
        out, as the retrieve stage leaves it out."""
        return [(rid, s) for rid, s in rank(self.relevance, depth) if s > 0]


def _scores(ctx: QueryContext) -> dict[str, float]:
    return {rid: c.score for rid, c in ctx.candidates.items()}


def rank_query(pipeline, spec: QuerySpec, depth: int, base: Ranking | None = None) -> Ranked:
    """Run `pipeline`'s stages on `spec` as a ranking (its one runner, stopped before the
    first stage that selects a packet) and gather what a ranking to `depth` needs (see the
    module docstring for each departure from a packet's run). `base` is the base
    retriever's ranking of the query when the caller has it (a batch of queries ranked at
    once, as the bare pipeline ranks them); else it is ranked here."""
    story = spec.story
    shell = Story(story=story.name, project=story.project, topics=story.topics, entities=story.entities,
                  records=[])
    res = resolve(shell, spec.query, spec.hints or Hints(), resolved(spec.settings).related_decay)
    ctx = pipeline.context(spec, res)
    retriever = ctx.retriever
    if base is None:
        # as the retrieve stage asks it: a retriever that pushes the hard rules down ranks
        # the records the query may be served
        base = rank(scored(retriever, spec.query, eligible=Eligible(spec.as_of, spec.include_private),
                           depth=depth)[0], depth)
    scale = base_scale(retriever, spec.query)
    top = base[:depth]
    bonus: dict[str, dict[str, float]] = {}
    verdict: str | None = None
    before: dict[str, float] = {}

    def gather(stage, ctx) -> None:
        nonlocal before, verdict
        if ctx.stopped is not None:  # an ASK or a SKIP is kept, but does not silence a ranking
            verdict, ctx.stopped = ctx.stopped[0], None
        elif stage.mode == "decides":
            verdict = "retrieve"
        if stage.mode == "retrieves":
            for position, (rid, _) in enumerate(top, 1):
                if rid not in ctx.candidates:
                    ctx.admit(story.by_id[rid], "retriever").why.append(f"{retriever.name} ranks it {position}")
            before = _scores(ctx)
            return
        now = _scores(ctx)   # one pass over a thousand candidates a stage: the bonus and the next `before`
        bonus[stage.name] = {rid: added for rid, score in now.items() if (added := score - before.get(rid, 0.0)) != 0}
        before = now

    pipeline.run_stages(ctx, ranking=True, after=gather)
    live = {rid for rid, c in ctx.candidates.items() if c.reason is None}
    relevance = {rid: c.score for rid, c in ctx.candidates.items() if rid in live}
    return Ranked({rid: s * scale for rid, s in top}, relevance, bonus, live, verdict, ctx.candidates, ctx.sittings)


def prepare(pipeline, story: Story) -> None:
    """Build what the pipeline's stages read for `story` (the base retriever's index, and
    what each stage's `prepare` builds, and the models it loads on demand), so a timed run
    measures queries only."""
    from garden.retrievers import load_models

    load_models(pipeline.indexes.retriever(story, pipeline.retriever_name))
    for stage in pipeline.stages:
        stage.prepare(pipeline.indexes, story)


def rank_texts(pipeline, collection: CollectionStory, queries: Sequence[str], depth: int) -> list[Ranking]:
    """Each query's ranking under the rule, by document id, best first. The base retriever
    ranks the queries as one batch, through the same `top_many` the bare pipeline uses, so
    that where nothing moves them the two rankings agree to the last tie (a batch and a
    single query can embed a query a rounding error apart, enough to swap two near-equal
    cosines)."""
    queries = list(queries)
    retriever = as_retriever(pipeline.indexes.retriever(collection.story, pipeline.retriever_name))
    bases = retriever.top_many(queries, depth) if queries else []
    out = []
    for query, base in zip(queries, bases):
        ranked = pipeline.ranking(collection.spec(query, depth), depth, base)
        out.append([(collection.doc_ids[rid], s) for rid, s in ranked.ordered(depth)])
    return out
