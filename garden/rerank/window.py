"""The window stage: a time the query names, counted back from its own `as_of`.

"What did I repot two weeks ago?" asked on 29 March names the days around 15 March; a
record dated inside that window is what the question points at, whatever its words share
with the query. Only a relative time the asker's own date anchors counts (`named_window`):

- `yesterday`: the day before `as_of`;
- `N days ago`: that day, give or take one (people round);
- `N weeks ago`: that day, give or take 3 days (half a week);
- `N months ago`: that day, give or take 15 days (half a month);
- `last week`: 4 to 10 days back (the week before this one, wherever in it `as_of` falls);
- `last weekend`: the Saturday and Sunday before `as_of`'s own week, a day either side;
- `last month`: the calendar month before `as_of`'s.

N is a numeral or a number word to twelve ("a", "an", "a couple of" = 2, "a few" = 3).
Years, seasons, "recently" and "last year" name nothing this stage uses: a window that
broad holds most of a long store and says little about any one record (and in a
conversation, LoCoMo's "last year" is said in a session about its own past, not the
question's). Dates written out ("on 3 June") are words for the retrievers.

A time counted from another one ("the last week of August", "two weeks before the move")
is not the question's own: an expression followed by `of`, `before`, `after`, `prior`,
`following`, `from`, `since` or `in` names no window here.

The stage runs before retrieval and keeps the window on the query's context. The structure
stage then multiplies the score of each live candidate dated inside the window (the score
it has there, after the topic and entity bonuses) by 1 + `window` and labels it
`structured_context` with the window in its `why`: a time the query resolved and a record
carries is structure, like a topic or an entity. Nothing outside the window is touched,
so the rule reorders among what the query's content found and never brings in a record of
its own; an undated record is left as it was. Time as evidence, never a filter.

The window's words stay in the query the retrievers read: in a conversation the turn that
answers often says them itself ("I volunteered last weekend"; taking them out cost
LoCoMo's such questions their best match). They say when, not what, so the decide stage
leaves them out of the query's support (decide.py): a store that never wrote "weeks" or
"ago" is not taken for one that lacks the answer.
"""
from __future__ import annotations

import calendar
import datetime as dt
import re

from garden.rerank.context import QueryContext, StageBase
from garden.rerank.timeline import Window

NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3}
UNIT_DAYS = {"day": 1, "week": 7, "month": 30}
SLACK_DAYS = {"day": 1, "week": 3, "month": 15}      # half the unit: the rounding people do
MAX_COUNT = 366                                       # a count past a year back names no window here

_NUMBER = r"(\d{1,3}|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_AGO = re.compile(rf"\b{_NUMBER}\s+(day|week|month)s?\s+ago\b", re.IGNORECASE)
_LAST = re.compile(r"\b(yesterday|last\s+weekend|last\s+week|last\s+month)\b", re.IGNORECASE)
# "the last week of August", "two weeks before the move": counted from another time than the question's
_ELSEWHERE = re.compile(r"\s*(of|before|after|prior|following|from|since|in)\b", re.IGNORECASE)


def named_window(query: str, as_of: dt.date) -> Window | None:
    """The window the query's first relative time names, counted back from `as_of`; None
    when it names none (see the module docstring for each expression and its slack)."""
    found = sorted([(m.start(), m) for m in (*_AGO.finditer(query), *_LAST.finditer(query))],
                   key=lambda pm: pm[0])
    for _, m in found:
        if _ELSEWHERE.match(query, m.end()):
            continue
        window = _window(m, as_of)
        if window is not None:
            return window
    return None


def _window(m: re.Match, as_of: dt.date) -> Window | None:
    said = m.group(0)
    named = " ".join(said.lower().split())
    if m.re is _AGO:
        raw = " ".join(m.group(1).lower().split())
        count = int(raw) if raw.isdigit() else NUMBER_WORDS[raw]
        unit = m.group(2).lower()
        if not 1 <= count * UNIT_DAYS[unit] <= MAX_COUNT:
            return None
        day = as_of - dt.timedelta(days=count * UNIT_DAYS[unit])
        slack = dt.timedelta(days=SLACK_DAYS[unit])
        return _clamped(day - slack, min(day + slack, as_of), said)
    if named == "yesterday":
        day = as_of - dt.timedelta(days=1)
        return _clamped(day, day, said)
    if named == "last week":
        return _clamped(as_of - dt.timedelta(days=10), as_of - dt.timedelta(days=4), said)
    if named == "last weekend":
        # the Saturday before this week's Monday (`as_of`'s week runs Monday to Sunday)
        saturday = as_of - dt.timedelta(days=as_of.weekday() + 2)
        return _clamped(saturday - dt.timedelta(days=1), saturday + dt.timedelta(days=2), said)
    first = as_of.replace(day=1)
    previous = (first - dt.timedelta(days=1)).replace(day=1)
    last_day = calendar.monthrange(previous.year, previous.month)[1]
    return _clamped(previous, previous.replace(day=last_day), said)


def _clamped(start: dt.date, end: dt.date, said: str) -> Window | None:
    return Window(start, end, said) if start <= end else None


def lift(ctx: QueryContext, candidates) -> list[str]:
    """Multiply each live candidate dated in the context's window by 1 + `window`; the ids
    lifted (the structure stage calls this: see the module docstring)."""
    window = ctx.window
    if window is None:
        return []
    lifted = []
    for c in candidates:
        if c.reason is None and c.score > 0 and window.holds(c.record.at):
            c.score *= 1 + ctx.settings.window
            c.label("structured_context", str(window))
            lifted.append(c.id)
    ctx.trace.setdefault("window", {})["lifted"] = sorted(lifted)
    return lifted


class TimeWindow(StageBase, name="window", mode="arms", writes=("window",),
                 title="Window: the time the query names",
                 drawn=('a time the query names, counted back from as_of ("two weeks ago", "last month"); its words '
                        'say when')):
    def run(self, ctx: QueryContext) -> None:
        window = named_window(ctx.spec.query, ctx.spec.as_of)
        if window is None:
            return
        ctx.window = window
        ctx.trace["window"] = {"said": window.said, "start": str(window.start), "end": str(window.end)}
