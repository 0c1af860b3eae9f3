"""Phrase contiguity: credit for a rare span of the query's words, in order and adjacent.

A bag of tokens cannot see word order. Every contiguous span of two or more whole words of
a query run is a candidate anchor; a record holding the span on word boundaries earns a
bounded bonus when the span occurs in no more than `ceiling` records. Refused: spans that
open or close with a function word, spans above the ceiling, spans in no record. Reordered,
hyphen-joined and plural forms never match because matching is on exact adjacent words.
Span counts come from a shingle index built once with the story, never from a scan of
every record per query.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from garden.analyzer import function_words, word_runs
from garden.rerank._span_index import MAX_SPAN, SpanIndex
from garden.rerank.context import Setting, StageBase

PHRASE_CEILING = Setting("phrase_ceiling", int, 2, "a span held by more records than this earns nothing", ge=1)
PHRASE_WEIGHT = Setting("phrase_weight", float, 1.0, "a three-word span's bonus", ge=0)
VIEW_FRACTION = Setting("view_fraction", float, 0.5, "a view restating the phrase gets this share of it", ge=0, le=1)

# A long query has hundreds of thousands of spans (712k for a 1 MB query); listing every one
# would make its trace line as large. The first TESTED_LISTED spans (longest first) are
# listed with their fate, then only the credited ones, and counts say what was left out.
TESTED_LISTED = 200


def shingles(runs: Iterable[list[str]], max_len: int = MAX_SPAN) -> set[tuple[str, ...]]:
    """Every span of 2..max_len adjacent words of each run."""
    out: set[tuple[str, ...]] = set()
    for run in runs:
        for i in range(len(run)):
            for n in range(2, max_len + 1):
                if i + n > len(run):
                    break
                out.add(tuple(run[i: i + n]))
    return out


class PhraseIndex(SpanIndex):
    """span -> records that hold it, for spans of 2..MAX_SPAN words (see _span_index)."""

    def holders(self, span: tuple[str, ...]) -> set[str]:
        return self.confirmed(span)


@dataclass
class PhraseCredit:
    bonus: dict[str, float] = field(default_factory=dict)   # record id -> bonus
    span: dict[str, str] = field(default_factory=dict)      # record id -> span credited
    tested: list[dict] = field(default_factory=list)        # listed spans and their fate: see TESTED_LISTED
    tested_total: int = 0                                   # spans tested, listed or not
    credited_total: int = 0                                 # spans credited, every one listed

    @property
    def omitted(self) -> int:
        """Spans tested but not listed: refused ones past the first TESTED_LISTED."""
        return self.tested_total - len(self.tested)

    def summary(self) -> dict:
        """What a trace keeps of the spans: the listed ones and the counts."""
        return {"tested": self.tested, "tested_total": self.tested_total, "omitted": self.omitted,
                "credited": self.credited_total}


def refusal(span: tuple[str, ...], holders: int, ceiling: int) -> str | None:
    """Why a span earns nothing, or None when it is a rare in-order anchor."""
    if span[0] in function_words():
        return f"opens with function word {span[0]!r}"
    if span[-1] in function_words():
        return f"closes with function word {span[-1]!r}"
    if holders == 0:
        return "in no record"
    if holders > ceiling:
        return f"in {holders} records, above the ceiling of {ceiling}"
    return None


def span_bonus(length: int, weight: float) -> float:
    """Bounded: a two-word span earns half the weight, three or more the whole of it."""
    return weight * min(1.0, (length - 1) / 2)


def phrase_credit(index: PhraseIndex, query: str, kinds: dict[str, str],
                  ceiling: int = 2, weight: float = 1.0, view_fraction: float = 0.5) -> PhraseCredit:
    credit = PhraseCredit()
    for span in sorted(shingles(word_runs(query)), key=lambda s: (-len(s), s)):
        count = index.count(span)
        why_not = refusal(span, count, ceiling)
        # holders are listed (and confirmed on their words) only for a span that earns credit
        holders = index.holders(span) if why_not is None else set()
        if why_not is None and not holders:  # a hash shared by another span: no record holds this one
            count, why_not = 0, refusal(span, 0, ceiling)
        text = " ".join(span)
        credit.tested_total += 1
        if why_not is None:
            credit.credited_total += 1
        if why_not is None or credit.tested_total <= TESTED_LISTED:
            credit.tested.append({"span": text, "records": count,
                                  "credited": why_not is None, "refused": why_not})
        if why_not:
            continue
        for rid in sorted(holders):
            bonus = span_bonus(len(span), weight)
            if kinds.get(rid) == "view":
                bonus *= view_fraction
            if bonus > credit.bonus.get(rid, 0.0):
                credit.bonus[rid] = bonus
                credit.span[rid] = text
    return credit


class Phrase(StageBase, name="phrase", settings=(PHRASE_CEILING, PHRASE_WEIGHT, VIEW_FRACTION),
             needs=("candidates",), writes=("candidates",), labels=("phrase_match",), supports=("phrase_match",),
             title="Phrase: rare in-order spans of the query",
             drawn="credit for rare in-order spans of the query",
             step="spans"):
    """The phrase stage: each record holding a rare in-order span of the query gains the
    bounded bonus; a record the retriever did not bring enters through the eligibility check."""

    def prepare(self, indexes, story) -> None:
        indexes.phrase_index(story)

    def run(self, ctx) -> None:
        spec, settings = ctx.spec, ctx.settings
        index = ctx.indexes.phrase_index(spec.story)
        kinds = spec.story.kinds
        credit = phrase_credit(index, spec.query, kinds, settings.phrase_ceiling, settings.phrase_weight,
                               settings.view_fraction)
        records = spec.story.records_of([rid for rid in credit.bonus if rid not in ctx.candidates])
        for rid, bonus in credit.bonus.items():
            c = ctx.candidates.get(rid)
            if c is None:
                c = ctx.admit(records[rid], "phrase")
            if c.reason is not None:
                continue
            c.score += bonus
            c.label("phrase_match", f"holds the rare in-order span {credit.span[rid]!r}")
        ctx.trace["phrase"] = credit.summary()
