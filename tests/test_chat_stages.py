"""The stages that read a chat's own messages: exchange (a message shares in the match of
its burst and of the burst it replies to) and perspective (a message restated with its
speaker's name and the dates it names). A fictional chat, ranked by bm25s alone so no model
is loaded; each test turns its stage on by its setting and checks the difference."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.analyzer import analyze
from garden.derived.tables import in_memory
from garden.models import Story
from garden.pipelines.structured import StructuredPipeline
from garden.rerank.exchange import exchanges
from garden.rerank.perspective import restatements, said_dates
from garden.rerank.query import QuerySpec
from garden.rerank.stages import Settings

SATURDAY = dt.date(2031, 5, 17)     # a Saturday


def quay() -> Story:
    def said(rid, who, text, day=SATURDAY, title="Chat 1"):
        return {"id": rid, "kind": "source", "at": day, "title": title, "speaker": who, "text": text}
    return Story.model_validate({"story": "quay", "project": "quay",
                                 "entities": {"odile": {"name": "Odile", "aliases": ["Odile"]},
                                              "teodor": {"name": "Teodor", "aliases": ["Teodor"]}},
                                 "records": [
        said("a1", "teodor", "So what did you end up naming the dinghy?"),
        said("a2", "teodor", "Last time you were torn between three, weren't you?"),
        said("b1", "odile", "Ha, it's settled at last"),
        said("b2", "odile", "She's the Grey Wren now, painted on the bow in blue"),
        said("c1", "teodor", "Yesterday I repainted the shed"),
        said("d1", "odile", "Tonight I'm cooking for the neighbours", day=dt.date(2031, 5, 24), title="Chat 2"),
        said("d2", "odile", "Last Friday the ferry was late", day=dt.date(2031, 5, 24), title="Chat 2"),
        {"id": "n1", "kind": "note", "at": SATURDAY, "text": "A note about the dinghy that no one said."},
    ]})


def ranked(query: str, **settings) -> dict:
    settings = {"exchange_share": 0.0, **settings}   # each test turns on only the stage it tests
    pipeline = StructuredPipeline("default", "bm25s", frozenset({"phrase", "neighbours"}))
    spec = QuerySpec(quay(), query, dt.date(2031, 6, 1), settings=Settings(candidates=50, **settings))
    return dict(pipeline.ranking(spec, 50).by_relevance(50))


def test_an_exchange_is_a_burst_and_the_burst_it_replies_to():
    with in_memory():
        found = exchanges(quay())
    # the question's burst lends to itself and to the reply burst; the reply, which asks
    # nothing, lends within itself only, not to the burst after it
    assert set(found["a1"]) == {"a2", "b1", "b2"} and set(found["a2"]) == {"a1", "b1", "b2"}
    assert set(found["b1"]) == {"b2"} and set(found["b2"]) == {"b1"} and "c1" not in found
    assert "n1" not in found and not any("d1" in v for k, v in found.items() if k.startswith(("a", "b", "c")))


def test_a_reply_without_the_questions_words_shares_in_its_match():
    query = "what name for the dinghy"
    off, on = ranked(query), ranked(query, exchange_share=0.5)
    assert "b2" not in off
    assert on["b2"] == pytest.approx(0.5 * on["a1"])
    assert on["a1"] == pytest.approx(off["a1"])    # the question borrows nothing from its reply


def test_relative_dates_are_counted_from_the_day_they_were_said():
    assert said_dates("Yesterday I repainted the shed", SATURDAY) == ["16", "May", "2031"]
    assert said_dates("Tonight we cook", SATURDAY) == ["17", "May", "2031"]
    assert said_dates("Last Friday the ferry was late", SATURDAY) == ["16", "May", "2031"]
    assert said_dates("Last Saturday it rained", SATURDAY) == ["10", "May", "2031"]
    assert said_dates("The shed is green", SATURDAY) == []


def test_a_message_is_restated_with_its_speakers_name_and_its_dates():
    with in_memory():
        found = restatements(quay())
    assert set(found["c1"]) == {"teodor", "16", "may", "2031"}
    assert set(found["a1"]) == {"odil"}                  # "you": the one other speaker
    assert "b2" not in found and "n1" not in found       # no person, no date; not a message


def test_a_third_person_question_with_a_date_lifts_the_first_person_message_that_said_it():
    query = "what did Teodor repaint on 16 May"
    off, on = ranked(query), ranked(query, perspective_share=0.5)
    asked = set(analyze(query))
    assert {"teodor", "16", "may"} < asked and "2031" not in asked
    assert on["c1"] == pytest.approx(off["c1"] + 0.5 * 3 / len(asked))   # teodor, 16, may: only its restatement
    assert ranked("what did the shed get", perspective_share=0.5)["c1"] == pytest.approx(
        ranked("what did the shed get")["c1"])


def test_a_sittings_followers_give_way_to_the_best_of_another_sitting():
    query = "the dinghy, the bow, the shed, the neighbours and the ferry"
    off, on = ranked(query), ranked(query, sitting_spread=1.0)
    first = {}
    for rid, score in sorted(off.items(), key=lambda kv: (-kv[1], kv[0])):
        sitting = "Chat 2" if rid.startswith("d") else "Chat 1"
        if rid != "n1":
            first.setdefault(sitting, []).append(rid)
    assert max(len(m) for m in first.values()) >= 3
    for members in first.values():
        assert on[members[0]] == pytest.approx(off[members[0]])       # a sitting's best is untouched
        for n, rid in enumerate(members[1:], start=1):
            assert on[rid] == pytest.approx(off[rid] / (1 + n))
    assert on["n1"] == pytest.approx(off["n1"])                        # a note is no sitting's message
