"""What the user gets (garden/evaluation/packets.py): one question's row from a packet,
the figures over a group, and the decision report, on fictional records."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.evaluation.abstention import PREDICTORS
from garden.evaluation.locomo import Question
from garden.evaluation.packets import decision_report, losses, packet_row, summarize
from garden.models import Budget, Packet, PacketItem, Passage, Story

STORY = Story.model_validate({"story": "kiln", "project": "kiln", "records": [
    {"id": "t1", "kind": "source", "text": "Ama: the kiln cracked in the frost.", "at": "2031-01-01"},
    {"id": "t2", "kind": "source", "text": "Kip: we relined it with firebrick.", "at": "2031-01-01"},
    {"id": "t3", "kind": "source", "text": "Ama: the glaze ran green.", "at": "2031-01-02"},
    {"id": "n1", "kind": "note", "text": "The kiln was relined after a frost crack.", "sources": ["t1", "t2"],
     "at": "2031-01-01"},
    {"id": "v1", "kind": "view", "text": "Firing log, first week.", "sources": ["t1", "t2", "t3"],
     "at": "2031-01-02"},
]})


def packet(*ids: str, decision: str = "retrieve") -> Packet:
    items = [PacketItem(id=i, kind=STORY.by_id[i].kind, fidelity="verbatim", labels=[], score=1.0, why=[],
                        text=STORY.by_id[i].text) for i in ids]
    return Packet(decision=decision, reason="", items=items,
                  budget=Budget(limit=1200, used=sum(len(STORY.by_id[i].body) for i in ids)))


def question(evidence: list[str], qid: str = "kiln/q1", category: str = "4 single-hop") -> Question:
    return Question(qid, "What happened to the kiln?", category, evidence, dt.date(2031, 2, 1))


def test_a_note_covers_the_turns_it_cites_and_precision_counts_items_that_touch_evidence():
    row = packet_row(question(["t1", "t2"]), packet("n1", "t3"), STORY, ranking=[3.0, 2.0, 1.0], query_terms=2)
    assert row.outcome == "answered" and row.covered == 1.0
    assert row.precision == 0.5  # the note cites evidence, the glaze turn does not
    assert row.items == 2 and row.chars == len(STORY.by_id["n1"].body) + len(STORY.by_id["t3"].body)
    assert set(row.predictors) == set(PREDICTORS) and row.predictors["top"] == 3.0


def test_a_view_covers_what_it_cites_but_shows_only_what_a_note_or_the_turn_itself_shows():
    pointed = packet_row(question(["t1", "t3"]), packet("v1"), STORY)
    assert pointed.covered == 1.0 and pointed.shown == 0.0 and pointed.precision == 1.0
    restated = packet_row(question(["t1", "t3"]), packet("v1", "n1"), STORY)
    assert restated.covered == 1.0 and restated.shown == 0.5  # the note restates t1; t3 only the view names
    both = summarize([restated, packet_row(question(["t3"], "q2"), packet(), STORY)])
    assert both["evidence_covered"] == 0.5 and both["evidence_shown"] == 0.25  # a silent packet shows nothing


def test_silent_asked_and_negative_rows():
    silent = packet_row(question(["t3"]), packet(), STORY)
    assert silent.outcome == "silent" and silent.covered == 0.0 and silent.precision is None
    asked = packet_row(question(["t3"]), packet(decision="ask"), STORY)
    assert asked.outcome == "asked"
    negative = packet_row(question([], "kiln/foreign:x"), packet("t3"), STORY)
    assert negative.negative and negative.covered is None and negative.precision is None


def test_coverage_counts_a_silent_packet_as_zero_and_the_answered_only_figure_does_not():
    rows = [packet_row(question(["t1"], "q1"), packet("t1"), STORY),
            packet_row(question(["t1"], "q2"), packet(), STORY)]
    figures = summarize(rows)
    assert figures["answered"] == 0.5 and figures["silent"] == 0.5
    assert figures["evidence_covered"] == 0.5 and figures["evidence_covered_answered"] == 1.0
    assert figures["evidence_shown"] == 0.5  # the turn itself is packed
    assert figures["precision"] == 1.0


def test_the_decision_report_gives_a_gate_auroc_only_where_a_gate_ran():
    def rows(gates):
        return [packet_row(question(["t1"], "p1"), packet("t1"), STORY, gate=gates[0], ranking=[2.0, 1.0]),
                packet_row(question(["t1"], "p2"), packet(), STORY, gate=gates[1], ranking=[1.5, 1.0]),
                packet_row(question([], "n1"), packet(), STORY, gate=gates[2], ranking=[0.5, 0.4]),
                packet_row(question([], "n2"), packet("t3"), STORY, gate=gates[3], ranking=[1.0, 0.9])]

    report = decision_report({"gated": rows([3.0, 1.0, -2.0, 2.0]), "bare": rows([None] * 4)})
    assert report.auroc["gated"]["gate"] == pytest.approx(0.75)  # one of four pairs misordered
    assert report.auroc["bare"]["gate"] is None
    assert report.auroc["bare"]["top"] == 1.0  # the predictors read the ranking either way
    assert report.groups["gated"]["negatives"]["answered"] == 0.5
    assert report.operating["gated"] == (0.5, 0.5)  # two of four answered, one of them a negative
    assert "gated gate" in report.curves and "bare gate" not in report.curves
    assert losses(rows([None] * 4)) == [0.0, 0.0, 1.0, 1.0]


def test_a_passage_counts_as_its_record_and_pays_for_its_own_characters():
    long_turn = Story.model_validate({"story": "kiln", "project": "kiln", "records": [
        *STORY.model_dump()["records"],
        {"id": "t4", "kind": "source", "text": "Kip: " + "the kiln sat cold all week. " * 20, "at": "2031-01-03"}]})
    body = long_turn.by_id["t4"].body
    item = PacketItem(id="t4", kind="source", fidelity="transcript", labels=["passage"], score=1.0, why=[],
                      text=body[5:60], passage=Passage(start=5, end=60, length=len(body)))
    passage = Packet(decision="retrieve", reason="", items=[item], budget=Budget(limit=1200, used=55))
    row = packet_row(question(["t4", "t3"]), passage, long_turn)
    whole_item = item.model_copy(update={"text": body, "passage": None, "labels": []})
    whole = packet_row(question(["t4", "t3"]), Packet(decision="retrieve", reason="", items=[whole_item],
                                                      budget=Budget(limit=1200, used=len(body))), long_turn)
    assert (row.covered, row.shown, row.precision) == (whole.covered, whole.shown, whole.precision) == (0.5, 0.5, 1.0)
    assert row.chars == 55 < whole.chars == len(body)
