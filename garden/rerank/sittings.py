"""The sittings stage: the sittings themselves ranked, a result of their own.

A conversation is kept as sittings (sessions.py's rule: raw records written one after
another with the same date and title). A memory is often read a sitting at a time, and
the benchmarks score both grains. The sessions stage ranks the sittings only to reorder
their turns; this stage ranks them for their own sake, after every stage that moves a
score, and the packet lists the best (`Packet.sittings`), each with its score, its rank
and the records that carried it.

A sitting is ranked when the query found something in it: a record of the query's pool
(`lenders`: the `candidates` best live records with a positive score) standing in it,
itself a turn of the sitting or a record citing one (an observation, a summary; a record
citing turns of several sittings stands in each). Its score has three parts, each chosen
on both development benchmarks by the fourteen folds of experiments/session_ranking.py
(docs/longmemeval.md, "Sittings as results"):

- its evidence: the sum of the `SITTING_TOP` (3) best scores standing in it, each record
  counted once: a sitting where several records match beats one stray line;
- the sitting as a whole: `sitting_whole` (3) times the mean cosine to the query of every
  turn of it that the story's addressee did not say (every turn, in a story naming no
  addressee), read from the base retriever's semantic member: a sitting about the
  question's subject rises over one that mentions it once. The mean is on the cosine's
  own scale, not rescaled per query, so where every sitting talks alike (LoCoMo's two
  friends) it moves little, and where sittings differ in subject (a user's chats with an
  assistant) much;
- the time the query names: a sitting dated inside the window (window.py) counts
  1 + `sitting_dated` (2) times its score.

Ties are broken by the sitting's number, the story's order, never by a name. A base
retriever without a semantic member gives no whole-sitting part; a story without sittings
(a collection, a curated story) gives no ranking.

A bare retriever has no stages: its sittings are ranked by one rule, the same for every
retriever (`bare_sittings`): a sitting's score is the best score of a record standing in
it, so a sitting stands where its first record does in the retriever's ranking.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from garden.models import Record, Sitting, Story
from garden.rerank.context import QueryContext, Setting, StageBase, lenders
from garden.rerank.eligibility import hard_reason
from garden.rerank.sessions import SESSIONS, sessions
from garden.retrievers import is_semantic

SITTING_WHOLE = Setting("sitting_whole", float, 3.0, "a sitting's score adds this times the mean cosine of its turns "
                        "the addressee did not say (sittings.py)", ge=0)
SITTING_DATED = Setting("sitting_dated", float, 2.0, "a sitting dated inside the time the query names counts 1 + this "
                        "times its score (sittings.py)", ge=0)
SITTING_TOP = 3        # a sitting's evidence: its best records' scores, this many summed
SITTINGS_SHOWN = 10    # the sittings a packet lists, best first

Standing = dict[int, list[tuple[float, str]]]   # sitting -> (score, record id) standing in it, best first


def sitting_records(story: Story) -> dict[int, tuple[str, ...]]:
    """Sitting number -> the ids of its records, in the story's order; made once per story."""
    def build(story: Story) -> dict[int, tuple[str, ...]]:
        found: dict[int, list[str]] = {}
        for rid, number in sessions(story).items():
            found.setdefault(number, []).append(rid)
        return {number: tuple(ids) for number, ids in found.items()}
    return story.remembered("sitting_records", build)


def standing(story: Story, scored: Iterable[tuple[str, float]],
             records: Mapping[str, Record] | None = None) -> Standing:
    """Each sitting's evidence: the (score, id) of every record with a positive score that
    stands in it (a turn of it, or a record citing one of its turns), best first, ties in
    the story's order. `records` holds the records the caller has at hand; any other is
    read from the story."""
    session_of = sessions(story)
    if not session_of:
        return {}
    scored = [(rid, score) for rid, score in scored if score > 0]
    citing = [rid for rid, _ in scored if rid not in session_of and (records is None or rid not in records)]
    records = {**story.records_of(citing), **(records or {})}
    order = story.order
    out: Standing = {}
    for rid, score in scored:
        if rid in session_of:
            numbers = {session_of[rid]}
        elif rid in records:
            numbers = {session_of[s] for s in records[rid].sources if s in session_of}
        else:
            continue
        for number in numbers:
            out.setdefault(number, []).append((score, rid))
    for held in out.values():
        held.sort(key=lambda pair: (-pair[0], order.get(pair[1], 0)))
    return out


def best(held: Sequence[tuple[float, str]]) -> tuple[float, list[str]]:
    """The bare rule: the best score standing in the sitting, and its record."""
    return held[0][0], [held[0][1]]


def top_sum(held: Sequence[tuple[float, str]]) -> tuple[float, list[str]]:
    """The sum of the `SITTING_TOP` best scores standing in the sitting, and their records."""
    top = held[:SITTING_TOP]
    return sum(score for score, _ in top), [rid for _, rid in top]


def ranked(story: Story, evidence: Standing, pool: Callable, said: Callable[[Sequence[tuple[float, str]]], str],
           parts: Mapping[int, list[tuple[float, str]]] | None = None,
           factors: Mapping[int, tuple[float, str]] | None = None, limit: int | None = None) -> list[Sitting]:
    """The sittings holding evidence, best first, ties by number (the best `limit`, or
    all): each one's pooled evidence (`pool`: `best` or `top_sum`; `said` puts the pooled
    records in words), plus its `parts` (what each adds, and why), times its `factors` (the
    factor, and why)."""
    parts, factors = parts or {}, factors or {}
    scores, made = {}, {}
    for number, held in evidence.items():
        score, carried = pool(held)
        why = [said(held[:len(carried)])]
        for added, reason in parts.get(number, ()):
            score += added
            why.append(reason)
        factor, reason = factors.get(number, (1.0, ""))
        if factor != 1.0 and score > 0:   # a factor lifts what matched; it never deepens a negative score
            score *= factor
            why.append(reason)
        scores[number], made[number] = score, (carried, why)
    order = sorted(scores, key=lambda n: (-scores[n], n))[:limit]
    members = sitting_records(story)
    opening = story.records_of([members[n][0] for n in order])
    out = []
    for rank, number in enumerate(order, 1):
        first = opening[members[number][0]]
        carried, why = made[number]
        out.append(Sitting(sitting=number, rank=rank, score=round(scores[number], 6), title=first.title,
                           at=first.at, carried_by=carried, why=why))
    return out


def bare_sittings(story: Story, scored: Iterable[tuple[str, float]], name: str,
                  limit: int | None = None) -> list[Sitting]:
    """A bare retriever's sittings (see the module docstring): each ranked by the best
    score of a record standing in it (the best `limit`, or all)."""
    return ranked(story, standing(story, scored), best,
                  lambda top: f"its best record under {name}: {top[0][1]} {top[0][0]:.3f}", limit=limit)


def unaddressed_means(ctx: QueryContext, numbers: Iterable[int]) -> dict[int, float]:
    """Sitting -> the mean cosine to the query of its turns the story's addressee did not
    say, read from the base retriever's semantic members (the best of them, as the
    sessions stage reads them; a turn a member does not score counts 0); {} without one.
    A turn no packet of this query may hold (private, not yet observed: the hard eligibility
    rules) is left out, so what the query may not see does not move what it sees."""
    semantic = [m for m in ctx.retriever.members().values() if is_semantic(m)]
    if not semantic:
        return {}
    story = ctx.spec.story
    members = sitting_records(story)
    numbers = list(numbers)
    ids = [rid for n in numbers for rid in members[n]]
    records = story.records_of(ids)
    heard = {n: [rid for rid in members[n] if (story.addressee is None or records[rid].speaker != story.addressee)
                 and hard_reason(records[rid], ctx.spec) is None] for n in numbers}
    wanted = [rid for n in numbers for rid in heard[n]]
    cosines = [m.scores_of(ctx.spec.query, wanted) for m in semantic]
    return {n: sum(max(c.get(rid, 0.0) for c in cosines) for rid in heard[n]) / len(heard[n])
            for n in numbers if heard[n]}


def _said(top: Sequence[tuple[float, str]]) -> str:
    return (f"its best {len(top)} record{'s' * (len(top) > 1)}: " + ", ".join(f"{rid} {s:.3f}" for s, rid in top)
            + (f" (sum {sum(s for s, _ in top):.3f})" if len(top) > 1 else ""))


class Sittings(StageBase, name="sittings", settings=(SITTING_WHOLE, SITTING_DATED), mode="arms",
               needs=("candidates",), reads=("window",), writes=("sittings",),
               title="Sittings: the sittings themselves, ranked", tables=(SESSIONS,),
               drawn=("the sittings themselves ranked, a result of their own (each one's three best records, its "
                      "turns as a whole, the time the query names); the packet lists the best")):
    def run(self, ctx: QueryContext) -> None:
        story, settings = ctx.spec.story, ctx.settings
        if not sessions(story):
            return
        evidence = standing(story, [(c.id, c.score) for c in lenders(ctx)],
                            {c.id: c.record for c in ctx.candidates.values()})
        if not evidence:
            return
        parts: dict[int, list[tuple[float, str]]] = {}
        if settings.sitting_whole > 0:
            whose = f"its turns not said by {story.addressee}" if story.addressee else "its turns"
            weight = settings.sitting_whole
            for number, mean in unaddressed_means(ctx, evidence).items():
                parts[number] = [(weight * mean, f"as a whole: the mean cosine of {whose} {mean:.3f} "
                                                 f"(x{weight:g}: {weight * mean:+.3f})")]
        factors: dict[int, tuple[float, str]] = {}
        window = ctx.window
        if window is not None and settings.sitting_dated > 0:
            members = sitting_records(story)
            opening = story.records_of([members[n][0] for n in evidence])
            factor = 1 + settings.sitting_dated
            factors = {n: (factor, f"{window} (x{factor:g})") for n in evidence
                       if window.holds(opening[members[n][0]].at)}
        ctx.sittings = ranked(story, evidence, top_sum, _said, parts, factors)
        ctx.trace["sittings"] = {"ranked": len(ctx.sittings)}
