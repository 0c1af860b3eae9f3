"""The stages that read a conversation's structure: cited (a note credits the turns it
cites), neighbours (a turn shares in the score of the turn beside it), the entity's
selectivity in the structure stage, and the ids a query names. A fictional story, ranked
by bm25s alone so no model is loaded; each test removes the stage it tests and checks the
difference."""
from __future__ import annotations

import datetime as dt
import math
import re

import pytest
from hypothesis import given, settings, strategies as st

from garden.models import Story
from garden.rerank.stages import SETTING_DEFAULTS, Settings
from garden.pipelines.structured import StructuredPipeline
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import named_ids
from garden.rerank.structure import entity_selectivity

DAY = dt.date(2031, 4, 2)
TITLE = "Session 1, 9:00 am on 2 April, 2031"


def harbour() -> Story:
    turn = {"kind": "source", "at": DAY, "title": TITLE}
    return Story.model_validate({"story": "harbour", "project": "harbour",
                                 "entities": {"wren": {"name": "Wren", "aliases": ["Wren"]},
                                              "odo": {"name": "Odo", "aliases": ["Odo"]}},
                                 "records": [
        {"id": "t1", **turn, "speaker": "odo", "text": "Odo: How did the regatta go?"},
        {"id": "t2", **turn, "speaker": "wren", "text": "Wren: We came second, the jib tore."},
        {"id": "t3", **turn, "speaker": "odo", "text": "Odo: I painted the boathouse door teal."},
        {"id": "t4", "kind": "source", "at": DAY, "speaker": "wren", "text": "Wren: untitled aside about kelp."},
        {"id": "t5", "kind": "source", "at": DAY, "speaker": "odo", "text": "Odo: another aside about kelp."},
        {"id": "n1", "kind": "note", "fidelity": "summary", "at": DAY, "entities": ["wren"],
         "text": "Wren finished second in the harbour sailing race.", "sources": ["t2"]},
        {"id": "x1", "kind": "decision", "at": DAY, "text": "Sailing race entries close at noon.",
         "sources": ["t1"]},
    ]})


def ranked(without: frozenset[str], query: str, **settings) -> dict:
    # phrase credit comes after the credit stages and would blur the arithmetic
    pipeline = StructuredPipeline("default", "bm25s", without | {"phrase"})
    spec = QuerySpec(harbour(), query, DAY, settings=Settings(candidates=50, **settings))
    return dict(pipeline.ranking(spec, 50).by_relevance(50))


def test_a_matching_note_credits_the_turn_it_cites_and_a_decision_does_not():
    query = "sailing race result"  # words of the note and the decision, none of turn t2 or t1
    # neighbours off: t1 would otherwise share in t2's credited score
    with_stage, without = ranked(frozenset({"neighbours"}), query), ranked(frozenset({"cited", "neighbours"}), query)
    share = SETTING_DEFAULTS["cited_share"]  # 0.75; one source: spread 1
    assert "t2" not in without and with_stage["t2"] == pytest.approx(share * with_stage["n1"])
    assert "t1" not in with_stage  # x1, a decision, matches and cites t1: its support, not credited
    halved = ranked(frozenset({"neighbours"}), query, cited_share=0.5)
    assert halved["t2"] == pytest.approx(0.5 * halved["n1"])


def test_a_turn_shares_in_its_neighbours_score_within_a_titled_session():
    query = "regatta"  # only t1 says it
    with_stage, without = ranked(frozenset(), query), ranked(frozenset({"neighbours"}), query)
    assert set(without) == {"t1"}
    assert with_stage["t2"] == pytest.approx(SETTING_DEFAULTS["context_share"] * with_stage["t1"])  # 0.75
    assert "t3" not in with_stage  # two away: credit is lent one step, never onward
    kelp = ranked(frozenset(), "untitled aside kelp")
    assert set(kelp) == {"t4", "t5"} and kelp["t4"] == pytest.approx(ranked(frozenset({"neighbours"}),
                                                                           "untitled aside kelp")["t4"])


def test_a_turn_lends_its_neighbours_its_own_match_never_the_credit_it_borrowed():
    # "harbour sailing race" is only the note's: t2 scores by n1's citation credit alone, so
    # t1 and t3 beside it have nothing of their own to be lent
    query = "harbour sailing race"
    with_stage, without = ranked(frozenset(), query), ranked(frozenset({"neighbours"}), query)
    assert with_stage["t2"] > 0 and with_stage["t2"] == pytest.approx(without["t2"])
    assert "t3" not in with_stage
    # t1 says "regatta" itself: what it lends t2 is its own match, whatever t2 borrowed
    both = ranked(frozenset(), "regatta harbour sailing race")
    alone = ranked(frozenset({"cited"}), "regatta harbour sailing race")
    assert both["t2"] - alone["t2"] == pytest.approx(SETTING_DEFAULTS["cited_share"] * both["n1"])
    assert both["t1"] == pytest.approx(alone["t1"])  # t2's borrowed credit is not lent back to t1


def test_an_entity_bonus_is_scaled_by_its_selectivity():
    story = harbour()
    selectivity = entity_selectivity(story)
    assert selectivity == {"wren": pytest.approx(math.log(7 / 1) / math.log(7))}  # one record carries wren
    # a story where every record carries the entity: the bonus is worth nothing
    flat = Story.model_validate({"story": "f", "project": "f", "entities": {"a": {"aliases": ["Ada"]}},
                                 "records": [{"id": f"r{i}", "kind": "note", "text": f"Ada note {i}",
                                              "entities": ["a"]} for i in range(3)]})
    assert entity_selectivity(flat) == {"a": 0.0}


def test_a_speaker_is_checked_like_an_entity(tmp_path):
    from garden.formats.stories import semantic_errors

    bad = harbour().model_copy(deep=True)
    bad.records[0].speaker = "nobody"
    assert any("field speaker: 'nobody' is not a canonical entity id" in e
               for e in semantic_errors(bad, tmp_path / "harbour.yaml"))


def _named_by_pattern(ids, query):
    """The rule as one pattern per id, which `named_ids` replaces with one pass."""
    return sorted(rid for rid in ids if re.search(rf"(?<![\w.-]){re.escape(rid)}(?![\w-])", query))


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(alphabet="d13.ab-x_ ,é", max_size=14))
def test_named_ids_finds_what_one_pattern_per_id_finds(query):
    ids = ["d1.3", "a-b", "x_1", "d1", "ab", "d1.3.1"]
    story = Story.model_validate({"story": "s", "project": "s",
                                  "records": [{"id": i, "kind": "note", "text": "t"} for i in ids]})
    assert named_ids(story, query) == _named_by_pattern(ids, query)
