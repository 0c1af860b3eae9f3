"""The gather stage: a question that gathers asks for a set, not for one record.

A gathering question (shape.py: a list, a "both", a count, the days between two events)
is answered by evidence told in several sittings, each piece of which matches the
question weakly alone: "Which dishes has Odile cooked with fennel?" is answered by a soup
one Saturday, a salad another, a risotto a third. Ranked one record at a time, the top
fills with whatever shares most words with the whole question: ten messages of the
evening that talked most about fennel, or the other person's messages that name the one
asked about. The stage reads what the question asks for beyond its shared words, and
only for a gathering question; a pinpoint question keeps its ranking exactly.

- **The person it is about** (`gather_focus`). A gathering question that names some of
  the story's speakers but not all asks about their history: what they did, said, cooked.
  In a chat of two people, the other one's messages name the person asked about ("How was
  the risotto, Odile?") and share the question's words, but the list is in what the
  person said. A live raw record said by a speaker the question does not name gives way:
  its score and its rank prior are divided by 1 + `gather_focus` (the decide stage reads
  its own match, score over prior, so the decision is not moved by the order). The
  premise stage's test guards it, read by who said each record: when the store's best
  lexical evidence for the question, names blanked out, was said by another person, 1.6
  times the best the named one said (the premise stage's `premise_ratio` as its folds
  chose it, premise.py), the question may pin
  the thing on the wrong person, and nothing gives way.
- **One search per facet** (`gather_facets`). An interval or an order asks of two events
  ("How many days passed between Teodor's fall from the ladder and his first swim after
  it?"), a pair of two people ("Which town have both Odile and Teodor visited?"); each
  part is told in its own sitting and its own words, and the whole question matches
  neither well. Each facet (shape.py, `facets`) is searched on its own by the base
  retriever, as the retrieve stage searches the query, and a record's relevance for its
  best facet, times `gather_facets`, becomes its score where that is more than it had
  (a record no search of the whole question found comes in by the `facet` door),
  labelled `facet_match`.
- **Every sitting that holds some** (`gather_sittings`). The packet of a gathering question
  packs the best item of each sitting of its evidence lane first, best sitting first, then
  the rest by score, so that within the budget it carries evidence from each sitting that
  holds some, rather than a sitting's followers before another sitting's best (the lanes
  have already chosen what rides; this orders only what the budget keeps). The packet says
  how many sittings it gathered (`Packet.gathered`).
- **Support over the set** (`gather_held`, read by the decide stage): the share of the
  question's words the store holds is read over the union of the best records rather than
  in one, so a list whose every item is weak alone is not left silent.

`gather_focus` is 0.5, the point every fold of every development kind chose; the other
settings stay 0 (off): the folds chose them nowhere, or what they gave cost something
else (docs/gathering.md gives every figure: experiments/gathering.py, the development
kinds' folds, judged per shape).
"""
from __future__ import annotations

from garden.rerank.candidates import Candidate, by_score
from garden.rerank.context import PackRule, QueryContext, Setting, StageBase
from garden.rerank.premise import PREMISE_RATIO, SPEAKERS, best_by_owner, speakers
from garden.rerank.retrieve import relevance_sum, searched
from garden.rerank.shape import facets
from garden.retrievers import is_semantic
from garden.rerank.sessions import SESSIONS, sessions

GATHER_FOCUS = Setting("gather_focus", float, 0.5, "a gathering question naming some of the story's speakers: "
                       "another speaker's record gives way by 1 + this (gather.py)", ge=0, le=100)
GATHER_FACETS = Setting("gather_facets", float, 0.0, "a gathering question's facets (an interval's two events, "
                        "a pair's two people) each searched alone: a record's best facet relevance times this "
                        "(gather.py)", ge=0, le=10)
GATHER_SITTINGS = Setting("gather_sittings", int, 0, "1: a gathering question's packet packs each sitting's best "
                          "first (gather.py); 0: by score", ge=0, le=1)
RAW_KINDS = ("source", "chunk")
# the premise test's ratio, as the premise stage's folds chose it (premise.py); a constant
# here, since a setting is read by the one stage that declares it
PREMISE_GUARD = PREMISE_RATIO.default


def said_by(record, people: frozenset[str]) -> str | None:
    """Who said `record`: the list is in what its person said, whoever it is about."""
    return record.speaker if record.speaker in people else None


def focus_on(ctx: QueryContext) -> tuple[frozenset[str], str]:
    """The speakers a gathering question is about (empty: no focus) and why, in words."""
    people = speakers(ctx.spec.story)
    named = frozenset(e for e in ctx.resolution.entities if e in people)
    if not named or named >= people:
        return frozenset(), "it names none of the story's speakers, or all of them"
    if len(named) == 1:
        (person,) = named
        best = best_by_owner(ctx, people, person, whose=said_by)
        own = best.get(person, (0.0, ""))[0]
        rival = max((s for who, (s, _) in best.items() if who != person), default=0.0)
        if rival > 0 and (own <= 0 or rival / own >= PREMISE_GUARD):
            return frozenset(), f"the store's best evidence is another's, not {person}'s (the premise test)"
    return named, "it asks about " + " and ".join(sorted(named))


class SittingsFirst(PackRule):
    """A gathering question's evidence lane in packing order: each sitting's best item first,
    best sitting first, then the rest by score (see the module docstring)."""

    def widen(self, ctx: QueryContext, packed: list[Candidate], evidence: list[Candidate]) -> list[Candidate]:
        sitting_of = sessions(ctx.spec.story)
        seen: set[int] = set()
        first, rest = [], []
        for c in evidence:   # the lane's own order: best first, ties by id
            sitting = sitting_of.get(c.id)
            if sitting is not None and sitting not in seen:
                seen.add(sitting)
                first.append(c)
            else:
                rest.append(c)
        return first + rest


def gathered(story, packed: list[Candidate]) -> int:
    """The number of sittings the packed items stand in (a note stands in its sources')."""
    sitting_of = sessions(story)
    found = {sitting_of[i] for c in packed for i in (c.id, *c.record.sources) if i in sitting_of}
    return len(found)


def search_facets(ctx: QueryContext, share: float) -> list[str]:
    """Each facet of the question searched alone; a record's best facet relevance times
    `share` becomes its score where that is more. The facets searched."""
    found = facets(ctx.spec.query)
    semantic = {name: is_semantic(m) for name, m in ctx.retriever.members().items()}
    best: dict[str, tuple[float, str, dict]] = {}
    for facet in found:
        ids, raw, relevant = searched(ctx, facet, ctx.settings.candidates)
        for n, rid in enumerate(ids):
            value = share * relevance_sum(relevant[n], semantic, raw[n], ctx.settings.semantic_weight)
            if value > best.get(rid, (0.0, "", {}))[0]:
                best[rid] = (value, facet, raw[n])
    records = ctx.spec.story.records_of(sorted(best))  # one read where the records live in Milvus
    for rid in sorted(best):
        value, facet, raw = best[rid]
        known = rid in ctx.candidates
        c = ctx.admit(records[rid], "facet")
        if c.reason is not None or c.score >= value:
            continue
        if not known:
            c.scores = dict(raw)
        c.score = value
        c.label("facet_match", f"matches '{facet}', a part of the question searched alone")
    return list(found)


class Gather(StageBase, name="gather", settings=(GATHER_FOCUS, GATHER_FACETS, GATHER_SITTINGS),
             labels=("facet_match",), needs=("candidates",), reads=("shape",), writes=("candidates", "pack_rules"),
             title="Gather: a question that gathers asks for a set", tables=(SPEAKERS, SESSIONS),
             drawn=("a gathering question: each facet searched alone, the person asked about first, each sitting's "
                    "best packed first (docs/gathering.md)")):

    def run(self, ctx: QueryContext) -> None:
        if ctx.shape is None or not ctx.shape.gathering:
            return
        settings = ctx.settings
        if settings.gather_sittings:
            ctx.pack_rules.append(SittingsFirst())
        if settings.gather_facets > 0:
            ctx.trace["gather"] = {"facets": search_facets(ctx, settings.gather_facets)}
        if settings.gather_focus <= 0:
            return
        named, why = focus_on(ctx)
        ctx.trace.setdefault("gather", {}).update(focus=sorted(named), why=why)
        if not named:
            return
        factor = 1 + settings.gather_focus
        for c in by_score([c for c in ctx.candidates.values() if c.reason is None and c.score > 0]):
            speaker = c.record.speaker
            if c.record.kind in RAW_KINDS and speaker is not None and speaker not in named:
                c.score /= factor
                c.prior /= factor
                c.why.append(f"said by {speaker}; the gathering question {why} (/{factor:g})")
