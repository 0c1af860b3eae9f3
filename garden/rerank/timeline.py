"""Time as evidence, never a TTL. Everything takes an injected `as_of`; nothing reads the clock."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from garden.models import Record, Story
from garden.retrievers import NEVER, RecordFields


def not_yet_observed(record: Record, as_of: dt.date) -> bool:
    """A record observed, produced or decided after `as_of` does not exist yet."""
    appeared = record.appeared_at
    return appeared is not None and appeared > as_of


def superseded_as_of(record: Record, story: Story, as_of: dt.date) -> str | None:
    """The id of the successor that has replaced this record by `as_of`, if any.

    A record whose successor has not been observed yet is still current on that date.
    """
    successor = record.superseded_by
    if not successor:
        return None
    target = story.by_id.get(successor)
    if target is None or not_yet_observed(target, as_of):
        return None
    return successor


def state_reason(record: Record, story: Story, as_of: dt.date) -> str | None:
    """Why a state cannot be served as current on `as_of`, or None when it can."""
    if record.kind != "state":
        return None
    if superseded_as_of(record, story, as_of) or (record.status == "superseded" and not record.superseded_by):
        return "superseded_state"
    if record.valid_to is not None and record.valid_to < as_of:
        return "not_current"
    if record.valid_from is not None and record.valid_from > as_of:
        return "not_current"
    return None


def record_fields(record: Record, story: Story) -> RecordFields:
    """The fields a retriever that `pushes_down` filters by, made by the rules above, so
    that `Eligible(as_of, include_private).admits(record_fields(r, story))` is exactly
    "no hard rule but `control_plane` rejects r on as_of" (control records are never
    indexed): `not_yet_observed` is `appeared`; `superseded_state` and `not_current` are the
    live days, from `valid_from` to `valid_to` and up to the day the successor appears
    (never, for a state superseded with no successor named; from its start, for one whose
    successor has no date)."""
    appeared = record.appeared_at
    live_from, live_until = 0, NEVER
    if record.kind == "state":
        if record.valid_from is not None:
            live_from = record.valid_from.toordinal()
        if record.valid_to is not None:
            live_until = record.valid_to.toordinal() + 1
        successor = story.by_id.get(record.superseded_by) if record.superseded_by else None
        if successor is not None:
            shown = successor.appeared_at
            live_until = min(live_until, shown.toordinal() if shown is not None else 0)
        elif record.status == "superseded" and not record.superseded_by:
            live_until = 0
    return RecordFields(record.kind, story.project_of(record), bool(record.private),
                        appeared.toordinal() if appeared is not None else 0, live_from, live_until)


def checkpoint_note(record: Record, as_of: dt.date) -> str | None:
    """A visible review note when `expected_resolution_at` has passed with no confirmation
    after it. A checkpoint is not an expiry: the note changes neither presence nor rank."""
    due = record.expected_resolution_at
    if due is None or due >= as_of:
        return None
    confirmed = record.last_confirmed_at
    if confirmed is not None and confirmed > due and confirmed <= as_of:
        return None
    last = f"last confirmed {confirmed}" if confirmed else "never confirmed"
    return f"review checkpoint {due} passed by {as_of} with no later confirmation ({last})"


@dataclass(frozen=True)
class Window:
    """A time the query names (the window stage, garden/rerank/window.py): its first and
    last day, counted back from as_of."""

    start: dt.date
    end: dt.date
    said: str           # the words that named it, as the query wrote them

    def holds(self, day: dt.date | None) -> bool:
        return day is not None and self.start <= day <= self.end

    def __str__(self) -> str:
        span = str(self.start) if self.start == self.end else f"{self.start} to {self.end}"
        return f"dated {span}, the window '{self.said}' names"
