"""The gather stage (garden/rerank/gather.py) on the fictional Merrowby chat: a pinpoint
question keeps its packet and ranking exactly; a gathering question about one person has
the other's messages give way (unless the premise test says the evidence is the other's);
its packet packs each sitting's best first and says how many sittings it gathered."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.formats.stories import load_story
from garden.pipelines import make_pipeline
from garden.rerank.decide import query_support, vocabulary
from garden.rerank.query import QuerySpec
from garden.rerank.sessions import sessions
from garden.rerank.stages import Settings

AS_OF = dt.date(2031, 6, 1)
OFF = Settings(gather_focus=0.0)
ON = Settings(gather_focus=1.0, gather_sittings=1, gather_held=1)
LIST = "Which dishes has Odile cooked with fennel?"


@pytest.fixture(scope="module")
def story():
    return load_story("fixtures/merrowby-messages.yaml")


@pytest.fixture(scope="module")
def pipeline():
    return make_pipeline("default")


def run(pipeline, story, query, settings=None, budget=1200):
    spec = QuerySpec(story, query, AS_OF, budget=budget, settings=settings or OFF)
    return pipeline.run(spec)


def candidates(outcome) -> dict[str, dict]:
    return {c["id"]: c for c in outcome.deferred["candidates"]()}


@pytest.mark.parametrize("query", ["What name did Odile give her boat?", "When did Odile repaint the shed?",
                                   "What did Teodor's niece want to name?"])
def test_a_pinpoint_question_keeps_its_packet_and_ranking_exactly(pipeline, story, query):
    off, on = run(pipeline, story, query), run(pipeline, story, query, ON)
    assert on.trace["shape"]["shape"] == "pinpoint"
    assert on.packet.model_dump() == off.packet.model_dump()
    assert candidates(on) == candidates(off)
    assert "gather" not in on.trace
    ranked_off = pipeline.ranking(QuerySpec(story, query, AS_OF, settings=OFF), 30).by_relevance(30)
    ranked_on = pipeline.ranking(QuerySpec(story, query, AS_OF, settings=ON), 30).by_relevance(30)
    assert ranked_on == ranked_off


def test_the_other_speakers_messages_give_way_for_a_gathering_question_about_one(pipeline, story):
    off, on = candidates(run(pipeline, story, LIST)), candidates(run(pipeline, story, LIST, ON))
    assert run(pipeline, story, LIST, ON).trace["gather"] == {"focus": ["odile"], "why": "it asks about odile"}
    for rid, c in on.items():
        record = story.by_id[rid]
        if record.speaker == "teodor" and off[rid]["score"] > 0 and c["lane"] == "evidence":
            assert c["score"] == pytest.approx(off[rid]["score"] / 2, abs=1e-6), rid
        elif record.speaker == "odile":
            assert c["score"] == pytest.approx(off[rid]["score"], abs=1e-6), rid
    # Odile's risotto now ranks above Teodor's fennel seeds, which led it
    assert off["m4.4"]["score"] > off["m5.1"]["score"]
    assert on["m5.1"]["score"] > on["m4.4"]["score"]


def test_the_focus_leaves_the_decision_its_own_match(pipeline, story):
    off, on = run(pipeline, story, LIST), run(pipeline, story, LIST, Settings(gather_focus=3.0))
    assert on.trace["decide"] == off.trace["decide"]


def test_no_focus_when_the_store_says_the_premise_is_anothers(pipeline, story):
    # Teodor's fennel seeds and plants are his; asked as Odile's, the premise test finds them Teodor's
    outcome = run(pipeline, story, "How many fennel plants has Odile pulled out of the allotment?", ON)
    assert outcome.trace["shape"]["shape"] == "gathering"
    assert outcome.trace["gather"]["focus"] == []
    assert "premise test" in outcome.trace["gather"]["why"]


def test_no_focus_for_a_question_naming_both_people(pipeline, story):
    outcome = run(pipeline, story, "What have both Odile and Teodor said about fennel?", ON)
    assert outcome.trace["gather"]["focus"] == []


def test_the_packet_packs_each_sittings_best_first_and_counts_its_sittings(pipeline, story):
    budget = 200
    plain = run(pipeline, story, "What are all the things Teodor said about fennel?",
                Settings(standout=1.0, gather_focus=0.0), budget)
    spread = run(pipeline, story, "What are all the things Teodor said about fennel?",
                 Settings(standout=1.0, gather_focus=0.0, gather_sittings=1), budget)
    sitting = sessions(story)
    assert plain.trace["shape"]["shape"] == "gathering"
    for outcome in (plain, spread):
        assert outcome.packet.gathered == len({sitting[i] for i in outcome.packet.ids()})
    # the same lane, packed in another order: each sitting's best first, so more sittings fit
    firsts = spread.packet.ids()[:spread.packet.gathered]
    assert len({sitting[i] for i in firsts}) == len(firsts)
    assert spread.packet.gathered > plain.packet.gathered


def test_a_pinpoint_packet_gathers_nothing(pipeline, story):
    assert run(pipeline, story, "What name did Odile give her boat?", ON).packet.gathered is None


def test_support_over_the_set_holds_what_the_best_records_hold_together(story):
    vocab = vocabulary(story)
    texts = [(0.5, "a fennel soup"), (0.4, "an orange salad")]
    one = query_support("fennel soup and orange salad", vocab, texts)
    together = query_support("fennel soup and orange salad", vocab, texts, over_set=True)
    assert together["held"] > one["held"]
    assert together["held"] == pytest.approx(1.0)
    assert together["top"] == one["top"] and together["known"] == one["known"]


def test_each_facet_is_searched_alone_and_lifts_what_matches_it(pipeline, story):
    query = "How many days passed between Odile's fennel soup and her fennel risotto?"
    off = candidates(run(pipeline, story, query))
    facets_only = Settings(gather_facets=1.0, gather_focus=0.0)
    outcome = run(pipeline, story, query, facets_only)
    assert outcome.trace["gather"]["facets"] == ["Odile's fennel soup", "her fennel risotto"]
    on = candidates(outcome)
    lifted = [rid for rid in on if on[rid]["score"] > off.get(rid, {"score": 0.0})["score"] + 1e-6]
    # the soup never says fennel: the whole question misses it, its facet finds it
    assert "m1.5" in lifted
    assert off["m1.5"]["score"] < on["m1.5"]["score"]
    ranked = pipeline.ranking(QuerySpec(story, query, AS_OF, settings=facets_only), 30)
    labelled = {rid: c for rid, c in ranked.candidates.items() if "facet_match" in c.labels}
    assert "m1.5" in labelled and set(labelled) <= set(lifted)
    assert any("'Odile's fennel soup', a part of the question searched alone" in w for w in labelled["m1.5"].why)
    # no score goes down: a facet only lifts
    assert all(on[rid]["score"] >= off[rid]["score"] - 1e-6 for rid in off if rid in on)
