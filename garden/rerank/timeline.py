"""Time as evidence, never a TTL. Everything takes an injected `as_of`; nothing reads the clock."""
from __future__ import annotations

import datetime as dt

from garden.models import Record, Story


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
