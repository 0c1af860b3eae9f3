"""The eligibility rules every candidate passes, however it enters the pipeline.

Hard rules, for every route: a control record is never served (`control_plane`); a private
record only when the query allows it (`private`); a record that appears after `as_of` does
not exist yet (`not_yet_observed`); a state that is superseded or outside its validity is
not current (`superseded_state`, `not_current`). Soft rules, skipped only by a certain
route (an id the query names, a provenance link from a packed item): once the query names
a scoped entity, records of other projects go (`out_of_scope`); a record whose topics (or
entities) all differ from the ones the query resolved contradicts it (`off_topic`).
"""
from __future__ import annotations

import datetime as dt

from garden.models import Record
from garden.rerank.candidates import Candidate
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import Resolution
from garden.rerank.timeline import checkpoint_note, not_yet_observed, state_reason

HARD_REASONS = ("control_plane", "private", "not_yet_observed", "superseded_state", "not_current")
# what the eligibility check may give, whichever stage admits the candidate (`describe` labels)
ELIGIBILITY_REASONS = frozenset({*HARD_REASONS, "out_of_scope", "off_topic"})
ELIGIBILITY_LABELS = frozenset({"checkpoint_passed", "derived_view"})


def hard_reason(record: Record, spec: QuerySpec) -> tuple[str, str] | None:
    """(reason, detail) if a hard rule keeps `record` from any packet of this query, else
    None: what no route, certain or not, may serve (`HARD_REASONS`)."""
    story, as_of = spec.story, spec.as_of
    if record.kind == "control":
        return "control_plane", "a control record: stored and validated, never served"
    if record.private and not spec.include_private:
        return "private", "private record; the query does not allow private records"
    if not_yet_observed(record, as_of):
        return "not_yet_observed", f"appears {record.appeared_at}, after as_of {as_of}"
    why_not_current = state_reason(record, story, as_of)
    if why_not_current:
        return why_not_current, (f"state is not current on {as_of}"
                                 + (f"; superseded by {record.superseded_by}" if record.superseded_by else ""))
    return None


def eligibility(record: Record, spec: QuerySpec, res: Resolution, certain: bool) -> tuple[str, str] | None:
    """(reason, detail) if `record` may not be served for this query, else None."""
    hard = hard_reason(record, spec)
    if hard is not None or certain:
        return hard
    story = spec.story
    if res.projects:
        project = story.project_of(record)
        if project not in res.projects:
            return "out_of_scope", f"project {project}; the query is scoped to {', '.join(sorted(res.projects))}"
    clash = []
    # isdisjoint on the resolved names' keys: asked of every candidate, hundreds a query
    if res.topics and record.topics and res.topics.keys().isdisjoint(record.topics):
        clash.append(f"topics {', '.join(record.topics)} (query: {', '.join(res.topics)})")
    if res.entities and record.entities and res.entities.keys().isdisjoint(record.entities):
        clash.append(f"entities {', '.join(record.entities)} (query: {', '.join(res.entities)})")
    if clash:
        return "off_topic", "its fields contradict what the query resolved: " + "; ".join(clash)
    return None


def describe(c: Candidate, as_of: dt.date) -> None:
    """Labels that state facts about an admitted record, whatever its score: a passed
    checkpoint (a note, never an expiry), a derived view, a fidelity below transcript."""
    r = c.record
    note = checkpoint_note(r, as_of) if r.kind == "state" else None
    if note:
        c.label("checkpoint_passed", note)
    if r.kind == "view":
        c.label("derived_view", "a view restating evidence held elsewhere")
    if r.effective_fidelity in ("summary", "projection") and r.kind not in ("state", "decision"):
        c.why.append(f"fidelity {r.effective_fidelity}: reported as a {r.effective_fidelity}, not a transcript")
