"""The perspective stage: a message restated as a third person would ask about it.

People say "I repainted the shed yesterday"; a question about them asks "What did Odile
repaint on 16 May?". The words that tie the two, the speaker's name and the date, are not
in the message: they are in who sent it and when. Each raw record with a speaker (a
message, a turn) is restated from the chat alone, in a derived table that is never shown
as the source and is made again from the story whenever it changes:

- "I", "me", "my", "mine", "myself", "we", "us", "our": the speaker's name (the story's
  entity's name and aliases);
- "you", "your", "yours": the other speaker's, when the record's sitting (one date and
  title, as the neighbours stage reads a sitting) has exactly one other speaker;
- a relative date the record names, counted from the record's own date: "today", "this
  morning", "tonight" (its date), "yesterday", "last night" (the day before), "last
  <weekday>" (the latest such day before its date), and what the window stage's
  `named_window` reads ("two weeks ago", "last month", ...) as its dates: the day, month
  and year of a single day, the months and years of a longer span.

The restatement is the analyzed words (garden.analyzer) these add that the record's own
text lacks. A live candidate then receives

    perspective_share * (the share of the query's analyzed words only its restatement holds)

labelled `structured_context`: the restatement reorders what the query's content found and
never brings in a record of its own. `perspective_share` is chosen by the folds over the
four kinds of chat (experiments/chat_kinds.py, docs/chats.md).
"""
from __future__ import annotations

import calendar
import datetime as dt
import re

from garden.analyzer import analyze
from garden.derived.tables import groups_codec, table
from garden.models import Record, Story
from garden.rerank.context import QueryContext, Setting, StageBase
from garden.rerank.window import named_window

PERSPECTIVE_SHARE = Setting("perspective_share", float, 0.0,
                            "what a message gains when the query's words are in its restatement (the speaker's "
                            "name for 'I', the date for 'yesterday') and not in its text", ge=0, le=1)

FIRST = re.compile(r"\b(i|me|my|mine|myself|we|us|our|ours)\b", re.IGNORECASE)
SECOND = re.compile(r"\b(you|your|yours|yourself)\b", re.IGNORECASE)
SAME_DAY = re.compile(r"\b(today|this\s+morning|this\s+afternoon|this\s+evening|tonight)\b", re.IGNORECASE)
DAY_BEFORE = re.compile(r"\blast\s+night\b", re.IGNORECASE)
WEEKDAYS = [d.lower() for d in calendar.day_name]
LAST_WEEKDAY = re.compile(rf"\blast\s+({'|'.join(WEEKDAYS)})\b", re.IGNORECASE)


def day_words(day: dt.date) -> list[str]:
    return [str(day.day), calendar.month_name[day.month], str(day.year)]


def said_dates(text: str, said_on: dt.date) -> list[str]:
    """The words of the dates a text names relative to the day it was said (see above)."""
    out: list[str] = []
    if SAME_DAY.search(text):
        out += day_words(said_on)
    if DAY_BEFORE.search(text):
        out += day_words(said_on - dt.timedelta(days=1))
    for m in LAST_WEEKDAY.finditer(text):
        back = (said_on.weekday() - WEEKDAYS.index(m.group(1).lower())) % 7 or 7
        out += day_words(said_on - dt.timedelta(days=back))
    window = named_window(text, said_on)
    if window is not None:
        if window.start == window.end:
            out += day_words(window.start)
        else:
            months = {(window.start.year, window.start.month), (window.end.year, window.end.month)}
            out += [w for y, m in sorted(months) for w in (calendar.month_name[m], str(y))]
    return out


class Restated:
    """The restatements, folded record by record in the story's order (garden/derived/tables.py):
    record id -> the analyzed words its restatement adds. A sitting is restated once it is
    read whole, when its speakers are known."""

    def __init__(self, story: Story):
        self.entities = story.entities
        self.found: dict[str, tuple[str, ...]] = {}
        self.sitting: tuple | None = None
        self.held: list[Record] = []

    def add(self, r: Record) -> None:
        if r.kind == "control":
            return
        sitting = (r.at, r.title) if r.kind == "source" and r.speaker and r.title is not None else None
        if sitting != self.sitting:
            self._close()
            self.sitting, self.held = sitting, []
        if sitting is not None:
            self.held.append(r)

    def names(self, who: str) -> str:
        entity = self.entities.get(who)
        return " ".join([entity.name, *entity.aliases]) if entity is not None else who

    def _close(self) -> None:
        speakers = {r.speaker for r in self.held}
        for r in self.held:
            others = speakers - {r.speaker}
            words = []
            if FIRST.search(r.text):
                words.append(self.names(r.speaker))
            if len(others) == 1 and SECOND.search(r.text):
                words.append(self.names(next(iter(others))))
            if r.at is not None:
                words += said_dates(r.text, r.at)
            added = sorted(set(analyze(" ".join(words))) - set(analyze(r.text)))
            if added:
                self.found[r.id] = tuple(added)

    def value(self) -> dict[str, tuple[str, ...]]:
        self._close()
        self.held = []
        return dict(self.found)


RESTATEMENTS = table("restatements", Restated, groups_codec())


def restatements(story: Story) -> dict[str, tuple[str, ...]]:
    """Record id -> the words its restatement adds (see the module docstring); remembered on
    the story and saved (garden/derived/tables.py)."""
    return RESTATEMENTS.of(story)


class Perspective(StageBase, name="perspective", settings=(PERSPECTIVE_SHARE,), needs=("candidates",),
                  writes=("candidates",), labels=("structured_context",), supports=("structured_context",),
                  title="Perspective: a message restated with its speaker's name and its dates",
                  tables=(RESTATEMENTS,),
                  drawn="a message restated with its speaker's name and the dates it names (off: docs/chats.md)"):
    def run(self, ctx: QueryContext) -> None:
        share = ctx.settings.perspective_share
        if share <= 0:
            return
        asked = set(analyze(ctx.spec.query))
        if not asked:
            return
        restated = restatements(ctx.spec.story)
        if not restated:
            return
        for c in sorted(ctx.candidates.values(), key=lambda c: c.id):
            held = asked.intersection(restated.get(c.id, ()))
            if c.reason is None and held:
                c.score += share * len(held) / len(asked)
                c.label("structured_context", f"its restatement holds {', '.join(sorted(held))}, which the "
                                              f"query asks and its text does not say")
