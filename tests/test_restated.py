"""The restated stage (garden/rerank/restated.py) and its part in the pack stage: a raw
record the ranking chose rides as the shorter note drawn from it, when the gate lets that
note in. A fictional story, ranked by bm25s alone so no model is loaded; each behaviour is
checked against the same pipeline without the stage."""
from __future__ import annotations

import datetime as dt

from garden.models import Record, Story
from garden.rerank.stages import Settings
from garden.pipelines.structured import StructuredPipeline
from garden.rerank.candidates import Candidate
from garden.rerank.pack import pack
from garden.rerank.query import QuerySpec
from garden.rerank.restated import ShorterNote, notes_citing

DAY = dt.date(2031, 4, 2)
TITLE = "Session 1, 9:00 am on 2 April, 2031"
TURN = {"kind": "source", "at": DAY, "title": TITLE}
NOTE = {"kind": "note", "fidelity": "summary", "at": DAY}


def harbour(*extra: dict) -> Story:
    return Story.model_validate({"story": "harbour", "project": "harbour", "records": [
        {"id": "t1", **TURN, "text": "Odo: How did the regatta go in the end?"},
        {"id": "t2", **TURN, "text": "Wren: We came second at the regatta; the jib tore on the final leg and we "
                                     "limped home behind the ferry."},
        {"id": "t3", **TURN, "text": "Odo: The ferry was late again, the harbourmaster blamed the jib of a "
                                     "visiting yacht."},
        {"id": "n1", **NOTE, "text": "Wren finished second; a sail gave way.", "sources": ["t2"]},
        *extra,
    ]})


def run(story: Story, query: str, without=frozenset(), budget: int = 1200):
    # the cutoff off: the tiny store answers every query, which is not what is tested here
    pipeline = StructuredPipeline("default", "bm25s", frozenset(without) | {"phrase"})
    return pipeline.run(QuerySpec(story, query, DAY, budget, settings=Settings(standout=1)))


def rejected(outcome) -> dict[str, tuple[str, str]]:
    return {r.id: (r.reason, r.detail) for r in outcome.packet.rejected}


def test_a_turn_rides_as_the_shorter_note_drawn_from_it():
    story = harbour()
    outcome = run(story, "regatta jib tore")
    ids = outcome.packet.ids()
    assert "n1" in ids and "t2" not in ids
    reason, detail = rejected(outcome)["t2"]
    assert reason == "already_shown" and "n1" in detail
    item = next(i for i in outcome.packet.items if i.id == "n1")
    assert "provenance_supported" in item.labels and any("restates t2" in w for w in item.why)
    # the note holds none of the query's words: only the turn's place brought it in
    assert "n1" not in [i.id for i in run(story, "regatta jib tore", {"restated"}).packet.items]
    assert "t2" in run(story, "regatta jib tore", {"restated"}).packet.ids()


def test_the_characters_saved_go_to_evidence_the_packet_lacked():
    story = harbour()
    t1, t2, t3, n1 = (len(story.by_id[i].body) for i in ("t1", "t2", "t3", "n1"))
    budget = n1 + t1 + t3  # the ranking's order is t2, t1, t3: with t2 itself, t3 no longer fits
    assert t2 + t1 + t3 > budget
    with_stage = run(story, "regatta jib tore", budget=budget).packet.ids()
    without = run(story, "regatta jib tore", {"restated"}, budget=budget).packet.ids()
    assert with_stage == ["n1", "t1", "t3"] and without == ["t2", "t1"]


def test_a_note_no_shorter_than_the_turn_leaves_the_turn_in_place():
    long_note = {"id": "n2", **NOTE, "sources": ["t1"],
                 "text": "Odo wanted to hear from Wren about the outcome of the race, after a long day on the water."}
    story = harbour(long_note)
    assert len(story.by_id["n2"].body) >= len(story.by_id["t1"].body)
    outcome = run(story, "how did the regatta go in the end")
    assert "t1" in outcome.packet.ids() and "n2" not in outcome.packet.ids()


def test_the_gate_still_decides_which_note_may_stand_in():
    later = {"id": "n0", "kind": "note", "fidelity": "summary", "at": DAY + dt.timedelta(days=3),
             "text": "Wren: second.", "sources": ["t2"]}   # shortest, but not written yet on DAY
    hidden = {"id": "n00", **NOTE, "private": True, "text": "Second.", "sources": ["t2"]}
    story = harbour(later, hidden)
    assert notes_citing(story)["t2"] == ("n00", "n0", "n1")  # shortest first
    ids = run(story, "regatta jib tore").packet.ids()
    assert "n1" in ids and "n0" not in ids and "n00" not in ids
    # with private records allowed the shortest visible note stands in
    pipeline = StructuredPipeline("default", "bm25s", frozenset({"phrase"}))
    spec = QuerySpec(story, "regatta jib tore", DAY, include_private=True, settings=Settings(standout=1))
    assert "n00" in pipeline.run(spec).packet.ids()


def test_a_turn_the_query_names_by_id_rides_as_itself():
    outcome = run(harbour(), "what does t2 say about the regatta")
    assert "t2" in outcome.packet.ids()


def candidate(rid: str, text: str, sources=()) -> Candidate:
    record = Record(id=rid, kind="note" if sources else "source", text=text, sources=list(sources), at=DAY)
    return Candidate(record, score=1.0)


class StandIn(ShorterNote):
    """The restated stage's packing rule with the note it picks given by the test."""

    def __init__(self, pick):
        self.pick = pick

    def instead(self, ctx, c, packed_ids):
        return self.pick(c)


def test_pack_puts_the_stand_in_in_the_place_and_refuses_both_when_it_does_not_fit():
    turn, note, other = candidate("t1", "a long turn of talk"), candidate("n1", "short", ["t1"]), candidate("t2", "x")
    packed, used = pack([turn, other, note], 1200, 0, set(), [StandIn(lambda c: note if c is turn else None)])
    assert [c.id for c in packed] == ["n1", "t2"] and used == len("short") + len("x")  # the note not twice
    assert turn.reason == "already_shown" and note.reason is None
    turn, note = candidate("t1", "a long turn of talk"), candidate("n1", "short", ["t1"])
    packed, _ = pack([turn], 3, 0, set(), [StandIn(lambda c: note)])
    assert packed == [] and turn.reason == note.reason == "over_budget" and "as n1" in turn.detail
