"""Time as evidence: visibility as of a date, supersession, currency and review checkpoints."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.models import Record, Story
from garden.rerank.timeline import checkpoint_note, not_yet_observed, state_reason, superseded_as_of

D = dt.date


@pytest.fixture
def story() -> Story:
    return Story.model_validate({
        "story": "tiny",
        "project": "tiny",
        "records": [
            {"id": "state.old", "kind": "state", "text": "paper", "status": "superseded",
             "superseded_by": "state.new", "observed_at": "2029-12-01", "valid_from": "2029-12-01"},
            {"id": "state.new", "kind": "state", "text": "tablet", "status": "active",
             "observed_at": "2030-01-08", "valid_from": "2030-01-08"},
            {"id": "decision.paper", "kind": "decision", "text": "paper", "status": "superseded",
             "superseded_by": "decision.tablet", "decided_at": "2029-12-01"},
            {"id": "decision.tablet", "kind": "decision", "text": "tablet", "decided_at": "2030-01-08"},
            {"id": "state.window", "kind": "state", "text": "w",
             "observed_at": "2030-01-01", "valid_from": "2030-01-03", "valid_to": "2030-01-10"},
            {"id": "state.orphan", "kind": "state", "text": "o", "status": "superseded",
             "observed_at": "2030-01-01"},
            {"id": "note.undated", "kind": "note", "text": "n"},
        ],
    })


# --- visibility ------------------------------------------------------------------------


def test_a_record_does_not_exist_before_it_appears(story):
    new = story.record("state.new")
    assert not_yet_observed(new, D(2030, 1, 7)) is True
    assert not_yet_observed(new, D(2030, 1, 8)) is False
    assert not_yet_observed(new, D(2030, 2, 1)) is False


def test_appearance_is_the_earliest_of_at_observed_and_decided():
    r = Record(id="n", kind="note", text="t", at=D(2030, 1, 9), observed_at=D(2030, 1, 5), decided_at=D(2030, 1, 7))
    assert r.appeared_at == D(2030, 1, 5)
    assert not_yet_observed(r, D(2030, 1, 4)) and not not_yet_observed(r, D(2030, 1, 5))


def test_an_undated_record_is_always_visible(story):
    assert not_yet_observed(story.record("note.undated"), D(1900, 1, 1)) is False


# --- supersession ------------------------------------------------------------------------


def test_superseded_only_once_the_successor_exists(story):
    paper = story.record("decision.paper")
    assert superseded_as_of(paper, story, D(2029, 12, 20)) is None
    assert superseded_as_of(paper, story, D(2030, 1, 7)) is None
    assert superseded_as_of(paper, story, D(2030, 1, 8)) == "decision.tablet"
    assert superseded_as_of(story.record("decision.tablet"), story, D(2030, 1, 8)) is None


def test_a_superseded_state_is_current_until_its_successor_is_observed(story):
    old = story.record("state.old")
    assert state_reason(old, story, D(2029, 12, 20)) is None
    assert state_reason(old, story, D(2030, 1, 8)) == "superseded_state"
    assert state_reason(story.record("state.new"), story, D(2030, 1, 8)) is None


def test_superseded_status_without_a_successor_is_never_current(story):
    assert state_reason(story.record("state.orphan"), story, D(2030, 1, 2)) == "superseded_state"


# --- currency ------------------------------------------------------------------------------


def test_not_current_outside_the_validity_window(story):
    window = story.record("state.window")
    assert state_reason(window, story, D(2030, 1, 2)) == "not_current"     # before valid_from
    assert state_reason(window, story, D(2030, 1, 3)) is None
    assert state_reason(window, story, D(2030, 1, 10)) is None             # valid_to is inclusive
    assert state_reason(window, story, D(2030, 1, 11)) == "not_current"


def test_only_states_have_a_state_reason(story):
    assert state_reason(story.record("decision.paper"), story, D(2030, 2, 1)) is None
    assert state_reason(story.record("note.undated"), story, D(2030, 2, 1)) is None


# --- review checkpoints ----------------------------------------------------------------------


def state(**dates) -> Record:
    return Record(id="s", kind="state", text="t", **dates)


def test_a_passed_checkpoint_gets_a_note():
    r = state(observed_at=D(2030, 1, 2), last_confirmed_at=D(2030, 1, 5), expected_resolution_at=D(2030, 1, 10))
    note = checkpoint_note(r, D(2030, 1, 12))
    assert note == ("review checkpoint 2030-01-10 passed by 2030-01-12 with no later confirmation "
                    "(last confirmed 2030-01-05)")


def test_a_passed_checkpoint_never_confirmed():
    note = checkpoint_note(state(expected_resolution_at=D(2030, 1, 10)), D(2030, 1, 11))
    assert note is not None and "never confirmed" in note


def test_a_checkpoint_not_yet_due_gets_no_note():
    r = state(expected_resolution_at=D(2030, 1, 10))
    assert checkpoint_note(r, D(2030, 1, 9)) is None
    assert checkpoint_note(r, D(2030, 1, 10)) is None      # due today is not passed yet


def test_a_confirmation_after_the_checkpoint_clears_the_note():
    r = state(last_confirmed_at=D(2030, 1, 11), expected_resolution_at=D(2030, 1, 10))
    assert checkpoint_note(r, D(2030, 1, 12)) is None


def test_a_confirmation_on_the_checkpoint_day_does_not_clear_it():
    r = state(last_confirmed_at=D(2030, 1, 10), expected_resolution_at=D(2030, 1, 10))
    assert checkpoint_note(r, D(2030, 1, 12)) is not None


def test_a_confirmation_after_as_of_does_not_count_yet():
    r = state(last_confirmed_at=D(2030, 1, 20), expected_resolution_at=D(2030, 1, 10))
    assert checkpoint_note(r, D(2030, 1, 12)) is not None
    assert checkpoint_note(r, D(2030, 1, 20)) is None


def test_no_checkpoint_no_note():
    assert checkpoint_note(state(last_confirmed_at=D(2030, 1, 1)), D(2031, 1, 1)) is None



def hard_rules_match_record_fields(story: Story) -> int:
    """Check `record_fields` against the gate on every day around each date the story names,
    with and without private records; the number of (record, day) pairs it excludes."""
    from garden.rerank.eligibility import HARD_REASONS, eligibility
    from garden.rerank.query import QuerySpec
    from garden.rerank.resolve import Resolution
    from garden.rerank.timeline import record_fields
    from garden.retrievers import Eligible

    dates = {d for r in story.records for d in (r.appeared_at, r.valid_from, r.valid_to) if d is not None}
    days = sorted({d + dt.timedelta(days=shift) for d in dates for shift in (-1, 0, 1)})
    records = [r for r in story.records if r.kind != "control"]
    assert days and records
    excluded = 0
    for day in days:
        for private in (False, True):
            spec = QuerySpec(story, "q", day, include_private=private)
            for record in records:
                verdict = eligibility(record, spec, Resolution(), certain=True)
                assert verdict is None or verdict[0] in HARD_REASONS
                admitted = Eligible(day, private).admits(record_fields(record, story))
                assert admitted == (verdict is None), (record.id, day, private, verdict)
                excluded += not admitted
    return excluded


@pytest.mark.parametrize("name", ["aurora-ridge", "saltmarsh-ferry", "kiln-lane"])
def test_record_fields_admit_exactly_what_the_gates_hard_rules_admit(name):
    """What a retriever that pushes the hard rules down filters by (`record_fields`, read
    through `Eligible.admits`) is the gate's own verdict, on every shipped story."""
    from pathlib import Path

    from garden.formats.stories import load_story

    story = load_story(Path(__file__).resolve().parents[1] / "fixtures" / f"{name}.yaml")
    hard_rules_match_record_fields(story)


def test_record_fields_follow_validity_successors_and_orphans(story):
    """The same on a story with a validity window, a successor, a superseded state with no
    successor and a future record: each rule excludes something here."""
    assert hard_rules_match_record_fields(story) > 0
