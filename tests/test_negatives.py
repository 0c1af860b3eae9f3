"""Negatives built from a set of stores (garden/evaluation/negatives.py): who a store's
people are, how names are swapped, and the sample's determinism, count and provenance.
Fictional stores only."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.errors import GardenError
from garden.evaluation.locomo import Conversation, Question
from garden.evaluation.negatives import foreign_negatives, people, swap_people
from garden.models import Story


def store(name: str, speakers: list[tuple[str, str]], questions: list[str]) -> Conversation:
    """A story whose turns are spoken by `speakers` (id, name) in turn, with one question each."""
    records = [{"id": f"t{i}", "kind": "source", "text": f"{who}: turn {i}", "speaker": sid,
                "at": "2031-01-0" + str(i + 1)} for i, (sid, who) in enumerate(speakers)]
    entities = {sid: {"name": who, "aliases": [who]} for sid, who in speakers}
    story = Story.model_validate({"story": name, "project": name, "entities": entities, "records": records})
    asked = [Question(f"{name}/q{n}", text, "4 single-hop", ["t0"], dt.date(2031, 2, 1))
             for n, text in enumerate(questions)]
    return Conversation(story, asked)


def test_people_are_the_speakers_in_the_order_they_first_speak():
    conv = store("a", [("wren", "Wren"), ("odo", "Odo"), ("wren", "Wren")], [])
    assert people(conv.story) == [["Wren"], ["Odo"]]


@pytest.mark.parametrize("text, expected", [
    ("When did Wren fix Odo's kite?", "When did Pell fix Suri's kite?"),
    ("Did Wrenna meet Wren?", "Did Wrenna meet Pell?"),          # whole words only
    ("Who is Wren Ashby?", "Who is Pell?"),                       # a longer name is replaced whole
    ("What did nobody say?", "What did nobody say?"),
])
def test_swap_people_replaces_whole_names_by_position(text, expected):
    source = [["Wren Ashby", "Wren"], ["Odo"]]
    target = [["Pell"], ["Suri"]]
    assert swap_people(text, source, target) == expected


def test_a_shorter_target_list_is_used_round():
    assert swap_people("Odo and Wren and Kip", [["Wren"], ["Odo"], ["Kip"]], [["Pell"]]) == "Pell and Pell and Pell"


def stores() -> list[Conversation]:
    return [store("a", [("wren", "Wren"), ("odo", "Odo")], [f"Did Wren plant the {i} hedge?" for i in range(6)]),
            store("b", [("pell", "Pell"), ("suri", "Suri")], [f"Why did Suri sail on day {i}?" for i in range(4)]),
            store("c", [("kip", "Kip"), ("ama", "Ama")], [f"How did Kip tune harp {i}?" for i in range(5)])]


def test_each_store_gets_the_same_count_of_other_stores_questions_with_its_own_people():
    negatives = foreign_negatives(stores())
    assert {name: len(qs) for name, qs in negatives.items()} == {"a": 4, "b": 4, "c": 4}  # the smallest store's count
    for name, qs in negatives.items():
        for q in qs:
            assert not q.evidence and q.negative == "foreign"
            assert not q.source.startswith(f"{name}/"), "a store is never asked its own question"
            assert q.qid == f"{name}/foreign:{q.source}"
    a_names = {"Wren", "Odo"}
    assert all(not any(n in q.text for n in a_names) for q in negatives["b"] + negatives["c"])
    assert any("Pell" in q.text or "Suri" in q.text for q in negatives["b"])


def test_the_sample_is_deterministic_per_seed_and_per_store():
    assert foreign_negatives(stores(), seed=3) == foreign_negatives(stores(), seed=3)
    assert foreign_negatives(stores(), seed=3) != foreign_negatives(stores(), seed=4)
    # one stream per store: a store's negatives do not depend on the order the set is given in
    assert foreign_negatives(stores())["b"] == foreign_negatives(list(reversed(stores())))["b"]


def test_asked_on_the_receiving_store_s_last_day():
    negatives = foreign_negatives(stores(), per_store=2)
    assert all(q.as_of == dt.date(2031, 2, 1) for qs in negatives.values() for q in qs)
    assert all(len(qs) == 2 for qs in negatives.values())


def test_one_store_or_a_count_below_one_is_refused():
    with pytest.raises(GardenError, match="at least two stores"):
        foreign_negatives(stores()[:1])
    with pytest.raises(GardenError, match="at least 1"):
        foreign_negatives(stores(), per_store=0)
